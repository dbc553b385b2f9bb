"""The one registry idiom: registration, lookup, roles, parameters, variants."""

from __future__ import annotations

import pytest

from saf_utils import protocol as P
from saf_utils import registry as R
from saf_utils.reporting import records


def make() -> R.Registry:
    reg = R.Registry("thing", defaults={"kind": "plain", "ablation_of": None},
                     param_names=("k", "seed"), variants=True)

    @reg.register("b", "system", params=("k",))
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
    assert reg["b"].params == ("k",) and reg["b"].kind == "plain" and reg["a"].kind == "fold"
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
    with pytest.raises(ValueError, match="unknown parameter"):
        reg.register("x", "system", params=("lr",))
    with pytest.raises(ValueError, match=r"unknown thing\(s\) \['zz'\]"):
        reg.check(["b", "zz"])
    with pytest.raises(KeyError, match="not registered"):
        reg["zz"]


def test_roles_are_defined_once() -> None:
    assert R.ROLES == ("baseline", "system", "oracle", "probe")
    assert records.ROLES is R.ROLES and P.ELIGIBLE is R.ELIGIBLE
    assert R.role_order({"z": "baseline", "o": "oracle", "a": "system", "b": "baseline"}) == [
        "b", "z", "a", "o"]
