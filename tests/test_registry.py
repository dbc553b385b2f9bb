"""The one registry idiom: registration, lookup, roles, parameters, variants."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest

from notebook_reports import records
from saf_utils import registry as R
from saf_utils.statistics import validation_choice


@dataclass(frozen=True)
class KOnly:
    k: int = 1


def make() -> R.Registry:
    reg = R.Registry("thing", defaults={"kind": "plain", "ablation_of": None}, variants=True)

    @reg.register("b", "system", params=KOnly)
    def b():
        """B does b.

        More text."""

    @reg.register("a", "baseline", description="A, described", kind="fold")
    def a():
        pass

    @reg.register("seq:", "oracle")
    def seq():
        """Any seq:<x>."""

    return reg


def test_registration_lookup_and_order() -> None:
    reg = make()
    assert list(reg) == ["b", "a", "seq:"] and len(reg) == 3
    assert reg["b"].description == "B does b." and reg["a"].description == "A, described"
    assert reg["b"].params_type is KOnly and reg["a"].params_type is R.NoParams
    assert reg["b"].kind == "plain" and reg["a"].kind == "fold"
    assert reg["seq:mt5"].name == "seq:" and "seq:mt5" in reg and "c" not in reg
    assert reg.names(["baseline", "system"]) == ["b", "a"] and reg.names(kind="fold") == ["a"]
    assert reg.by_role(["a", "seq:x", "b"], "system", "oracle") == ["b", "seq:x"]
    assert reg.roles(["a"]) == {"a": "baseline"}
    assert reg.order(["val_chosen", "a", "b"]) == ["b", "a", "val_chosen"]
    assert reg.table().columns.tolist() == ["system", "role", "kind", "ablation_of", "params",
                                            "description"]
    with pytest.raises(AttributeError):
        reg["a"].nope  # noqa: B018
    reg.unregister("a")
    assert list(reg) == ["b", "seq:"]


def test_registration_errors() -> None:
    reg = make()
    with pytest.raises(ValueError, match="role"):
        reg.register("x", "winner")
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("b", "system")
    with pytest.raises(ValueError, match="unknown info"):
        reg.register("x", "system", family="f")
    with pytest.raises(TypeError, match="dataclass"):
        reg.register("x", "system", params=dict)
    with pytest.raises(ValueError, match=r"unknown thing\(s\) \['zz'\]"):
        reg.check(["b", "zz"])
    with pytest.raises(KeyError, match="not registered"):
        reg["zz"]


def test_roles_are_defined_once() -> None:
    assert R.ROLES == ("baseline", "system", "gold_input", "oracle", "probe")
    assert set(R.ROLE_WORDS) == set(R.ROLES) and "gold_input" not in R.ELIGIBLE
    assert records.ROLES is R.ROLES and validation_choice.ELIGIBLE is R.ELIGIBLE
    assert R.role_order({"z": "baseline", "o": "oracle", "a": "system", "b": "baseline"}) == [
        "b", "z", "a", "o"]


# ---- the system contract


def _contract_registry():
    from dataclasses import dataclass

    from saf_utils.registry import Registry

    @dataclass(frozen=True)
    class KParams:
        k: int = 3
        rate: float = 0.5
        name: str | None = None

    reg = Registry("toy system")

    @reg.register("toy", "baseline", params=KParams)
    def toy(data, params, scale=1):
        """Repeats k."""
        return pd.DataFrame({"id": data, "output": [params.k * scale] * len(data)})

    return reg, KParams


def test_params_come_from_the_dataclass_defaults_and_are_checked() -> None:
    reg, KParams = _contract_registry()
    assert reg.params("toy") == KParams()
    assert reg.params("toy", {"k": 5, "rate": 1}).rate == 1
    assert "k=3" in reg.table().params.iloc[0]
    with pytest.raises(ValueError, match="unknown parameter.*'kk'.*known"):
        reg.params("toy", {"kk": 1})
    with pytest.raises(ValueError, match="'k' = '5' should be int"):
        reg.params("toy", {"k": "5"})
    with pytest.raises(ValueError, match="should be int"):
        reg.params("toy", {"k": True})


def test_the_runner_runs_names_with_their_parameters() -> None:
    reg, _ = _contract_registry()
    (_, out, _), = reg.each(["toy"], ["a", "b"], {"toy": {"k": 2}}, scale=10)
    assert out.to_dict("list") == {"id": ["a", "b"], "output": [20, 20],
                                   "system": ["toy", "toy"]}
    with pytest.raises(ValueError, match="not run"):
        list(reg.each(["toy"], ["a"], {"other": {}}))
    with pytest.raises(ValueError, match="unknown"):
        list(reg.each(["nope"], ["a"]))


def test_a_selection_takes_every_system_a_list_or_what_the_registrations_say() -> None:
    reg = make()
    assert reg.select(None) == ["b", "a", "seq:"]
    assert reg.select(["a", "b"]) == ["b", "a"]  # registration order
    assert reg.select({"exclude": ["seq:"]}) == ["b", "a"]
    assert reg.select({"roles": ["baseline", "oracle"]}) == ["a", "seq:"]
    assert reg.select({"kind": ["fold"]}) == ["a"]
    assert reg.select(None, within=["seq:", "a"]) == ["a", "seq:"]
    assert reg.select({"exclude": ["a"]}, within=["a", "b"]) == ["b"]

    @reg.register("new", "system")
    def new():
        """Registered later: an exclusion that does not name it selects it."""

    assert reg.select({"exclude": ["seq:"]}) == ["b", "a", "new"]
    with pytest.raises(ValueError, match="unknown selection key"):
        reg.select({"family": ["x"]})
    with pytest.raises(ValueError, match="role"):
        reg.select({"roles": ["winner"]})
    with pytest.raises(ValueError, match="unknown thing"):
        reg.select({"exclude": ["zz"]})
    with pytest.raises(ValueError, match="one name"):
        reg.select("a")


def test_each_checks_every_parameter_first_and_times_every_system() -> None:
    reg, _ = _contract_registry()
    calls = []
    seen = list(reg.each(["toy"], ["a"], {"toy": {"k": 2}}, scale=1,
                         around=lambda name: _note(calls, name)))
    (name, out, seconds), = seen
    assert name == "toy" and out.output.tolist() == [2] and seconds >= 0
    assert calls == ["toy"]
    with pytest.raises(ValueError, match=r"not run \(unknown toy system"):
        list(reg.each(["toy"], ["a"], {"tyo": {}}))
    with pytest.raises(ValueError, match="should be int"):
        list(reg.each(["toy"], ["a"], {"toy": {"k": "2"}}))
    assert reg.check_params(["toy"], {"toy": None}) == {"toy": {}}


def _note(calls: list, name: str):
    from contextlib import contextmanager

    @contextmanager
    def cm():
        calls.append(name)
        yield

    return cm()
