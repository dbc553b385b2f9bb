"""Hand-made SAF frames shared by the tests of the saf modules: answers of three kinds
(correct, partial, wrong) to German questions, with references and feedback."""

from __future__ import annotations

import numpy as np
import pandas as pd

from saf_utils.saf import formats as S

DE = S.prompt_words("de")
EN = S.prompt_words("en")


def toy_frame(split: str, questions=("Q1", "Q2"), n_per=6, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    refs = {"Q1": "Das Foto der Tür (0.5 P) und die Antwort im Formular (0.5 P).",
            "Q2": "Tanken (0.25 P) und im Shop einkaufen (0.25 P), Budget 16 Euro.",
            "Q3": "Seife und Papier müssen vorhanden sein (0.5 P)."}
    good = {"Q1": "foto der tür und antwort im formular", "Q2": "tanken und shop einkaufen budget",
            "Q3": "seife und papier vorhanden"}
    for q in questions:
        for j in range(n_per):
            kind = j % 3
            if kind == 0:
                ans, lab, sc, fb = good[q], "Correct", 1.0, "Korrekt!"
            elif kind == 1:
                ans = good[q].split(" und ")[0] + f" vielleicht {rng.integers(9)}"
                lab, sc, fb = "Partially correct", 0.5, f"Teilweise: {q} fehlt etwas."
            else:
                ans, lab, sc, fb = f"keine ahnung {rng.integers(99)}", "Incorrect", 0.0, \
                    f"Leider falsch zu {q}."
            rows.append({"id": f"{split}-{q}-{j}", "question": q, "reference_answer": refs[q],
                         "provided_answer": ans, "answer_feedback": fb,
                         "verification_feedback": lab, "score": sc})
    return pd.DataFrame(rows).assign(split=split)
