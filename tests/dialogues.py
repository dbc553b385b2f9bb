"""Hand-made ArgSciChat dialogues shared by the tests of the argscichat modules: one
five-sentence paper and a three-turn dialogue about it."""

from __future__ import annotations

from saf_utils.argscichat import dialogue as A
from saf_utils.argscichat.data import MessagePair

CONTENT = (
    "We study parody detection in social media.",
    "Parody accounts imitate politicians on Twitter.",
    "We collect a data set of tweets from real and parody accounts.",
    "A BERT classifier reaches the best accuracy.",
    "Linguistic analysis shows markers of parody.",
)
TITLE = "Analyzing Political Parody in Social Media"


def pair(pid: str, query: str, reply: str, facts=(), hist_ids=(), hist_facts=(), turn=None,
         content=CONTENT) -> MessagePair:
    return MessagePair(
        pair_id=pid, paper_id="paper", title=TITLE, content=tuple(content),
        dialogue_id=hist_ids[0] if hist_ids else pid,
        turn=len(hist_ids) if turn is None else turn, query=query, reply=reply, history=(),
        history_ids=tuple(hist_ids), facts=tuple(CONTENT[i] for i in facts),
        fact_indexes=tuple(sorted(facts)), history_fact_indexes=tuple(tuple(h) for h in hist_facts),
    )


P0 = pair("d_0", "Hi", "Hi!")
P1 = pair("d_1", "Which data do they collect?", "They collect tweets from parody accounts.",
          facts=(2,), hist_ids=("d_0",), hist_facts=((),))
P2 = pair("d_2", "Which classifier works best?", "A BERT classifier is best.", facts=(3,),
          hist_ids=("d_0", "d_1"), hist_facts=((), (2,)))
PAIRS = [P0, P1, P2]
INDEX = A.pair_index(PAIRS)
