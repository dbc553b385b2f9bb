"""The one classifier factory (SAF labels, fact ranking, token compression): a scaled logistic
regression or histogram gradient boosting, scikit-learn's defaults but what callers tune."""

from __future__ import annotations

from typing import Any

CLASSIFIERS = ("logreg", "hgb")


def make_classifier(kind: str, seed: int = 0, C: float = 1.0, class_weight: Any = None,
                    **hgb_params: Any) -> Any:
    """``logreg``: StandardScaler + LogisticRegression(C, class_weight, max_iter=2000);
    ``hgb``: HistGradientBoostingClassifier(random_state=seed, class_weight, **hgb_params)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "logreg":
        if hgb_params:
            raise ValueError(f"logreg takes C and class_weight, not {sorted(hgb_params)}")
        return make_pipeline(StandardScaler(), LogisticRegression(
            C=C, class_weight=class_weight, max_iter=2000, random_state=seed))
    if kind == "hgb":
        return HistGradientBoostingClassifier(class_weight=class_weight, random_state=seed,
                                              **hgb_params)
    raise ValueError(f"unknown classifier kind {kind!r}; use one of {CLASSIFIERS}")
