"""The plan: one JSON artifact written by solve (sweep, compare) and read by compare, export, the
sampler and the stream batcher, with the same boundaries, batch sizes and figures everywhere,
refused when it meets other lengths or was tampered with."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketBatchSampler, BucketoptError
from bucketopt.cli import main
from bucketopt.plan import (
    PLAN_BYTES,
    check_lengths,
    histogram_fingerprint,
    lengths_fingerprint,
    load_plan,
    read_plan,
    validate_plan,
    write_plan,
)
from bucketopt.solver import evaluate_plan
from bucketopt.training.streaming import StreamBatcher

from .solver_settings import cli_flags, python_kwargs

PROFILE = "rtx-pro-6000-blackwell"
BUDGET = 16_384


def mix_lengths(n=3_000, seed=0):
    """A lognormal mix capped at 8,192 (short chats and long documents)."""
    rng = np.random.default_rng(seed)
    short = rng.lognormal(5.5, 0.6, n - n // 4)
    long = rng.lognormal(7.5, 0.5, n // 4)
    lengths = np.concatenate([short, long]).astype(np.int64) + 1
    return np.minimum(rng.permutation(lengths), 8_192)


LENGTHS = mix_lengths()
# (pad, GPUs, profile): both paddings, one and eight GPUs, with and without a profile
SETTINGS = [("edge", 1, None), ("batch", 1, None), ("edge", 8, PROFILE), ("batch", 8, PROFILE)]


def solve_flags(pad, gpus, profile):
    return ["-k", "4", *cli_flags(BUDGET, pad, profile, gpus)]


def solve_kwargs(pad, gpus, profile):
    return python_kwargs(BUDGET, pad, profile, gpus)


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def lens_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "lens.npy"
    np.save(path, LENGTHS)
    return path


# ------------------------------------------------------------------------------ the artifact
@pytest.mark.parametrize("pad,gpus,profile", SETTINGS)
def test_a_plan_holds_the_solution_and_round_trips(tmp_path, pad, gpus, profile):
    sol = bucketopt.solve(LENGTHS, 4, **solve_kwargs(pad, gpus, profile))
    plan = sol.to_plan()
    assert plan["format"] == "bucketopt-plan" and plan["kind"] == "1d"
    assert plan["boundaries"] == list(sol.boundaries)
    assert plan["batch_sizes"] == list(sol.batch_sizes)
    assert plan["token_budget"] == BUDGET and plan["pad"] == pad
    assert plan["objective"] == sol.objective and plan["packing"] == "fixed"
    assert plan["sync_buckets"] is True
    assert plan["world_size"] == gpus
    assert plan["optimality"] == sol.optimality
    pred = plan["predictions"]
    assert pred["padding_fraction"] == sol.padding_fraction
    assert pred["padded_tokens"] == sol.padded_tokens and pred["counts"] == list(sol.counts)
    if profile is None:
        assert plan["profile"] is None and pred["ktok_per_s"] is None
    else:
        assert plan["profile"]["name"] == profile
        assert pred["ktok_per_s"] == sol.ktok_per_s
        assert pred["ktok_per_s_interval"] == list(sol.ktok_per_s_interval)
        assert pred["eta_days_interval"] == list(sol.eta_days_interval)
    # the fingerprint: count, tokens and the hash of the histogram (any order, any form)
    fp = plan["fingerprint"]
    assert fp["samples"] == LENGTHS.size and fp["real_tokens"] == int(LENGTHS.sum())
    assert fp == lengths_fingerprint(np.sort(LENGTHS))
    assert fp == lengths_fingerprint(bucketopt.Histogram.from_lengths(LENGTHS))
    # to_plan -> write -> read -> equal, and the file is plain JSON
    path = write_plan(plan, tmp_path / "plan.json")
    assert read_plan(path) == plan == json.loads((tmp_path / "plan.json").read_text())
    assert load_plan(path) == load_plan(plan) == plan
    # re-scored on the same lengths as it was scored: the same figures
    again = evaluate_plan(plan, LENGTHS)
    assert again.boundaries == sol.boundaries and again.batch_sizes == sol.batch_sizes
    assert again.padded_tokens == sol.padded_tokens
    assert again.ktok_per_s == sol.ktok_per_s
    assert again.ktok_per_s_interval == sol.ktok_per_s_interval


def test_the_fingerprint_is_of_the_lengths_before_max_length():
    sol = bucketopt.solve(LENGTHS, 3, token_budget=BUDGET, max_length=2_048, overflow="split")
    plan = sol.to_plan()
    assert plan["fingerprint"] == lengths_fingerprint(LENGTHS)
    assert plan["max_length"] == 2_048 and plan["overflow"] == "split"
    assert sum(plan["predictions"]["counts"]) > LENGTHS.size  # the split chunks
    assert load_plan(json.loads(json.dumps(plan))) == plan
    sampler = BucketBatchSampler.from_plan(plan, LENGTHS)
    assert sampler.max_length == 2_048 and sampler.overflow == "split"


def test_the_fingerprint_hash_is_of_the_histogram():
    hist = bucketopt.Histogram.from_lengths([5, 3, 5, 9])
    import hashlib

    expected = hashlib.sha256(np.array([3, 5, 9], "<i8").tobytes()
                              + np.array([1, 2, 1], "<i8").tobytes()).hexdigest()
    assert histogram_fingerprint(hist) == {"samples": 4, "real_tokens": 22,
                                           "histogram_sha256": expected}
    assert lengths_fingerprint([5, 3, 5, 8]) != lengths_fingerprint([5, 3, 5, 9])


def test_memory_plans_carry_the_memory_rule():
    memory = {"m0": 1e9, "m1": 2e4, "m2": 2.0, "capacity": 8e9}
    sol = bucketopt.solve(LENGTHS, 3, pad="batch", memory=memory)
    plan = sol.to_plan()
    assert plan["token_budget"] is None and plan["memory"]["headroom"] == 0.9
    assert plan["batch_sizes"] == list(sol.batch_sizes)
    assert load_plan(json.loads(json.dumps(plan))) == plan
    by_hand = BucketBatchSampler(LENGTHS, sol.boundaries, batch_sizes=sol.batch_sizes)
    from_plan = BucketBatchSampler.from_plan(plan, LENGTHS)
    assert list(from_plan) == list(by_hand)


def test_a_solution_made_by_hand_has_no_plan():
    from bucketopt.data.histogram import Histogram
    from bucketopt.solution import make_solution

    sol = make_solution(Histogram.from_lengths([3, 4, 9]), [4, 9], token_budget=20, pad="edge")
    with pytest.raises(BucketoptError, match="no fingerprint"):
        sol.to_plan()
    # evaluate() and sweep() rows do make plans
    assert bucketopt.evaluate([3, 4, 9], [4, 9], token_budget=20).to_plan()["optimality"] is None
    row = bucketopt.sweep([3, 4, 9, 12], [1, 2]).solutions[1]
    assert row.to_plan()["constraints"]["k"] == 2


def test_to_dict_is_unchanged_by_the_plan_settings():
    sol = bucketopt.solve(LENGTHS, 3, token_budget=BUDGET)
    out = sol.to_dict()
    assert "settings" not in out and "fingerprint" not in out
    json.dumps(out)


# ------------------------------------------------------------------------ solve -> compare
@pytest.mark.parametrize("pad,gpus,profile", SETTINGS)
def test_solve_writes_the_plan_compare_reads(tmp_path, lens_file, capsys, pad, gpus, profile):
    path = tmp_path / "plan.json"
    flags = solve_flags(pad, gpus, profile)
    code, out, err = run(["solve", "--lens", lens_file, *flags, "--json", "-o", path], capsys)
    assert code == 0 and f"wrote {path}" in err
    solved = json.loads(out)
    assert "fingerprint" not in solved  # the JSON output is as it was
    plan = read_plan(path)
    assert plan["boundaries"] == solved["boundaries"]
    assert plan["batch_sizes"] == solved["batch_sizes"]
    code, out, err = run(["compare", "--lens", lens_file, "--plan", path, "--no-diversity",
                          "--json"], capsys)
    assert code == 0, err
    comparison = json.loads(out)
    row = comparison["strategies"]["bucketed"]
    assert row["boundaries"] == plan["boundaries"]
    assert comparison["token_budget"] == BUDGET and comparison["pad"] == pad
    planned = row["plan"]
    assert planned["batch_sizes"] == plan["batch_sizes"]
    assert planned["padding_fraction"] == pytest.approx(solved["padding_fraction"], rel=1e-12)
    assert row["padding_fraction_analytic"] == pytest.approx(solved["padding_fraction"],
                                                             rel=1e-12)
    if profile is not None:
        assert comparison["world_size"] == gpus
        assert planned["ktok_per_s"] == pytest.approx(solved["ktok_per_s"], rel=1e-12)
        assert planned["ktok_per_s_interval"] == pytest.approx(solved["ktok_per_s_interval"],
                                                               rel=1e-12)
        assert planned["eta_days"] == pytest.approx(solved["eta_days"], rel=1e-12)
    # the table says it too
    code, out, _ = run(["compare", "--lens", lens_file, "--plan", path, "--no-diversity"],
                       capsys)
    assert code == 0 and "bucketed: the plan's boundaries" in out


def test_compare_refuses_solver_flags_beside_a_plan(tmp_path, lens_file, capsys):
    path = write_plan(bucketopt.solve(LENGTHS, 3, token_budget=BUDGET).to_plan(),
                      tmp_path / "p.json")
    for extra in (["--pad", "batch"], ["-k", "3"], ["--token-budget", "4096"],
                  ["--profile", PROFILE], ["--token-b", "4096"], ["--max-length=100"]):
        code, out, err = run(["compare", "--lens", lens_file, "--plan", path, *extra], capsys)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "--plan sets the solver settings" in err
        assert extra[0].split("=")[0][:7] in err  # the flag is named
    code, _, err = run(["compare", "--lens", lens_file, "--plan", path, "-o",
                        tmp_path / "q.json", "--strategy", "bucketed"], capsys)
    assert code == 2 and err.count("\n") == 1


# ------------------------------------------------------------------------------- export
@pytest.mark.parametrize("fmt", ["sampler", "nemo", "lhotse", "tf"])
def test_export_of_a_plan_is_export_of_the_same_solve(tmp_path, lens_file, capsys, fmt):
    path = tmp_path / "plan.json"
    flags = solve_flags("batch", 8, PROFILE)
    assert run(["solve", "--lens", lens_file, *flags, "-o", path, "-q"], capsys)[0] == 0
    code, solved, _ = run(["export", "--lens", lens_file, *flags, "-f", fmt], capsys)
    assert code == 0
    # without --lens: nothing is read but the plan; with it: the fingerprint is checked
    for lens in ([], ["--lens", lens_file]):
        code, planned, err = run(["export", "--plan", path, *lens, "-f", fmt], capsys)
        assert code == 0, err
        assert json.loads(planned) == json.loads(solved)


def test_export_refuses_flags_beside_a_plan(tmp_path, capsys):
    path = write_plan(bucketopt.solve(LENGTHS, 3, token_budget=BUDGET).to_plan(),
                      tmp_path / "p.json")
    for extra in (["-k", "3"], ["--boundaries", "100,8192"], ["--pad", "edge"]):
        code, _, err = run(["export", "--plan", path, "-f", "nemo", *extra], capsys)
        assert code == 2 and err.count("\n") == 1 and "--plan sets" in err
    code, _, err = run(["export", "--plan", path, "-f", "nemo", "-o", path], capsys)
    assert code == 2 and "destroy the input" in err


# ------------------------------------------------------------------------------ sweep, compare
def test_sweep_writes_the_plan_of_row_k(tmp_path, lens_file, capsys):
    path = tmp_path / "plan.json"
    flags = ["--lens", lens_file, "-k", "2:6", "--token-budget", BUDGET, "--pad", "edge"]
    code, out, err = run(["sweep", *flags, "--k", "4", "-o", path, "--json"], capsys)
    assert code == 0 and f"wrote {path}" in err
    rows = {len(r["boundaries"]): r for r in json.loads(out)["rows"]}
    plan = read_plan(path)
    assert plan["boundaries"] == rows[4]["boundaries"]
    assert plan["batch_sizes"] == rows[4]["batch_sizes"]
    solved = bucketopt.solve(LENGTHS, 4, token_budget=BUDGET)
    assert plan["boundaries"] == list(solved.boundaries)
    # without --k: the recommended k
    code, out, _ = run(["sweep", *flags, "-o", path, "--json"], capsys)
    recommended = json.loads(out)["recommended_k"]
    assert code == 0 and read_plan(path)["constraints"]["k"] == recommended
    for bad in (["--k", "7", "-o", path], ["--k", "1", "-o", path], ["--k", "3"]):
        code, out, err = run(["sweep", *flags, *bad], capsys)
        assert code == 2 and out == "" and err.count("\n") == 1


def test_compare_writes_the_plan_of_a_row(tmp_path, lens_file, capsys):
    flags = ["--lens", lens_file, "-k", "4", "--token-budget", BUDGET, "--profile", PROFILE,
             "--gpus", "8", "--no-diversity", "--json"]
    for name in ("bucketed", "bucketed-padding", "lhotse"):
        path = tmp_path / f"{name}.json"
        code, out, err = run(["compare", *flags, "--strategy", name, "-o", path], capsys)
        assert code == 0 and f"wrote {path}" in err
        row = json.loads(out)["strategies"][name]
        plan = read_plan(path)
        assert plan["boundaries"] == row["boundaries"]
        assert plan["world_size"] == 8 and plan["profile"]["name"] == PROFILE
        assert plan["pad"] == "edge"  # the default of every command
        assert plan["sync_buckets"] is True  # as the sampler trains it
        if name == "bucketed-padding":
            assert plan["objective"] == "padding"
        if name == "lhotse":  # a rule of thumb: no optimum to prove
            assert plan["optimality"] is None and plan["constraints"] is None
    solved = bucketopt.solve(LENGTHS, 4, token_budget=BUDGET, profile=PROFILE, world_size=8)
    assert read_plan(tmp_path / "bucketed.json") == solved.to_plan()  # solve's very plan
    padding = bucketopt.solve(LENGTHS, 4, token_budget=BUDGET, profile=PROFILE, world_size=8,
                              objective="padding")
    assert read_plan(tmp_path / "bucketed-padding.json") == padding.to_plan()
    for bad in (["--strategy", "sorted", "-o", tmp_path / "x.json"],
                ["--strategy", "bucketed"], ["-o", tmp_path / "x.json"]):
        code, out, err = run(["compare", *flags, *bad], capsys)
        assert code == 2 and out == "" and err.count("\n") == 1


# ------------------------------------------------------------------------------ the sampler
@pytest.mark.parametrize("pad,gpus,profile", SETTINGS)
def test_the_sampler_of_a_plan_is_the_sampler_built_by_hand(pad, gpus, profile):
    sol = bucketopt.solve(LENGTHS, 4, **solve_kwargs(pad, gpus, profile))
    plan = json.loads(json.dumps(sol.to_plan()))
    for rank in sorted({0, gpus - 1}):
        by_hand = BucketBatchSampler(LENGTHS, sol.boundaries, batch_sizes=sol.batch_sizes,
                                     token_budget=BUDGET, rank=rank, world_size=gpus, seed=3)
        if profile is not None:  # world_size defaults to the plan's
            from_plan = BucketBatchSampler.from_plan(plan, LENGTHS, rank=rank, seed=3)
        else:
            from_plan = BucketBatchSampler.from_plan(plan, LENGTHS, rank=rank, seed=3,
                                                     world_size=gpus)
        assert from_plan.world_size == gpus
        for epoch in (0, 1):
            by_hand.set_epoch(epoch)
            from_plan.set_epoch(epoch)
            assert list(from_plan) == list(by_hand)
        assert from_plan.state_dict() == by_hand.state_dict()


def test_the_sampler_takes_a_path_and_overrides(tmp_path):
    sol = bucketopt.solve(LENGTHS, 3, token_budget=BUDGET)
    path = write_plan(sol, tmp_path / "plan.json")
    sampler = BucketBatchSampler.from_plan(path, LENGTHS, grad_accum=2, drop_last=True,
                                           sync_buckets=False)
    assert sampler.grad_accum == 2 and sampler.drop_last and sampler.sync_buckets is False
    assert list(sampler.edges) == list(sol.boundaries)


# ------------------------------------------------------------------------- the stream batcher
def test_the_stream_batcher_of_a_plan_is_the_one_built_by_hand():
    sol = bucketopt.solve(LENGTHS, 3, token_budget=BUDGET, pad="batch")
    plan = sol.to_plan()
    items = list(range(LENGTHS.size))

    def length(i):
        return int(LENGTHS[i])

    by_hand = StreamBatcher(items, sol.boundaries, token_budget=BUDGET, length=length,
                            world_size=2, rank=1, seed=5)
    from_plan = StreamBatcher.from_plan(plan, items, length=length, lengths=LENGTHS,
                                        world_size=2, rank=1, seed=5)
    assert list(from_plan) == list(by_hand)
    with pytest.raises(BucketoptError, match="other lengths"):
        StreamBatcher.from_plan(plan, items, length=length, lengths=LENGTHS[:-1])
    # a memory plan's batch sizes, under the budget of its largest batch
    mem = bucketopt.solve(LENGTHS, 3, pad="batch",
                          memory={"m0": 1e9, "m1": 2e4, "m2": 2.0, "capacity": 8e9})
    batcher = StreamBatcher.from_plan(mem.to_plan(), items, length=length)
    assert list(batcher.batch_sizes) == list(mem.batch_sizes)
    assert batcher.token_budget == max(b * e for b, e in zip(mem.batch_sizes, mem.boundaries))
    seen = sorted(i for batch in batcher for i in batch)
    assert seen == items


# ----------------------------------------------------------------------------- other lengths
def test_a_plan_with_other_lengths_is_refused_unless_accepted(tmp_path, lens_file, capsys):
    plan = bucketopt.solve(LENGTHS, 3, token_budget=BUDGET).to_plan()
    shard = np.minimum(mix_lengths(seed=1), LENGTHS.max())  # the same data, other samples
    with pytest.raises(BucketoptError) as err:
        BucketBatchSampler.from_plan(plan, shard)
    message = str(err.value)
    assert "\n" not in message and "other lengths" in message
    theirs, mine = plan["fingerprint"], lengths_fingerprint(shard)
    for fp in (theirs, mine):  # both fingerprints are named
        assert f"{fp['real_tokens']:,} tokens" in message
        assert fp["histogram_sha256"][:12] in message
    with pytest.raises(BucketoptError, match="other lengths"):
        check_lengths(plan, LENGTHS[:-1])
    with pytest.raises(BucketoptError, match="other lengths"):
        evaluate_plan(plan, shard)
    sampler = BucketBatchSampler.from_plan(plan, shard, allow_other_lengths=True)
    assert sorted(i for b in sampler for i in b) == list(range(shard.size))
    assert check_lengths(plan, LENGTHS) == plan["fingerprint"]
    # the command line: exit 2 and one line; --allow-other-lengths accepts it
    path = write_plan(plan, tmp_path / "plan.json")
    other = tmp_path / "shard.npy"
    np.save(other, shard)
    for argv in (["export", "--plan", path, "--lens", other, "-f", "nemo"],
                 ["compare", "--plan", path, "--lens", other, "--no-diversity"]):
        code, out, err = run(argv, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "other lengths" in err and "--allow-other-lengths" in err
        assert f"{theirs['samples']:,} samples" in err
        code, out, err = run([*argv, "--allow-other-lengths"], capsys)
        assert code == 0, err
    code, _, err = run(["export", "--plan", path, "--allow-other-lengths", "-f", "nemo"],
                       capsys)
    assert code == 0  # nothing to check without --lens
    code, _, err = run(["export", "--lens", other, "-k", "3", "--allow-other-lengths", "-f",
                        "nemo"], capsys)
    assert code == 2 and "--plan only" in err


# --------------------------------------------------------------------------- tampered plans
PLAN = bucketopt.solve(LENGTHS, 4, token_budget=BUDGET, pad="batch", profile=PROFILE,
                       world_size=8).to_plan()


def leaf_paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaf_paths(value, (*prefix, key))
    elif isinstance(node, list) and node and not isinstance(node[0], list):
        yield prefix
        yield from ((*prefix, i) for i in range(len(node)))
    else:
        yield prefix


PATHS = [p for p in leaf_paths(PLAN) if "coefficient_sets" not in p or len(p) < 4]
WRONG_TYPES = st.one_of(
    st.text(max_size=5), st.booleans(), st.none(),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=2),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30),
    st.recursive(st.integers(), lambda inner: st.lists(inner, max_size=2), max_leaves=30))


def mutate(plan, path, value):
    out = copy.deepcopy(plan)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def field_name(path):
    return ".".join(str(p) for p in path if not isinstance(p, int))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), WRONG_TYPES)
def test_a_tampered_plan_is_refused_with_one_line_naming_the_field(path, value):
    tampered = mutate(PLAN, path, value)
    try:
        checked = validate_plan(tampered, "plan.json")
    except BucketoptError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith("plan.json: field `")
        assert len(message) < 600
        named = message.split("`")[1].split("[")[0]
        # the field named is the one changed, or one it must agree with
        assert named.split(".")[0] in (field_name(path).split(".")[0], "predictions",
                                       "batch_sizes", "boundaries", "profile", "overflow",
                                       "token_budget", "pad", "packing", "checksum")
    else:  # accepted: only a mutation that changed nothing
        assert checked == tampered == PLAN


@pytest.mark.parametrize("path,value,named", [
    (("boundaries",), [4000, 2000, 8192], "boundaries"), (("boundaries", 0), -5, "boundaries[0]"),
    (("boundaries", 1), 1.5, "boundaries[1]"), (("batch_sizes", 0), 10**6, "batch_sizes"),
    (("token_budget",), "16384", "token_budget"), (("pad",), "none", "pad"),
    (("objective",), "speed", "objective"), (("sync_buckets",), 1, "sync_buckets"),
    (("packing",), "magic", "packing"), (("world_size",), 0, "world_size"),
    (("epochs",), True, "epochs"), (("profile", "beta"), math.inf, "profile.beta"),
    (("profile", "alpha"), -1.0, "profile.alpha"),
    (("predictions", "padding_fraction"), 0.5, "predictions.padding_fraction"),
    (("predictions", "ktok_per_s"), 1e6, "predictions.ktok_per_s_interval"),
    (("predictions", "counts", 0), 1, "predictions.counts"),
    (("predictions", "real_tokens"), 1, "predictions.padding_fraction"),
    (("fingerprint", "histogram_sha256"), "abc", "fingerprint.histogram_sha256"),
    (("fingerprint", "samples"), 2**70, "fingerprint.samples"),
    (("optimality", "exact"), "yes", "optimality.exact"), (("kind",), "2d", "kind"),
    (("format",), "bucketopt", "format"), (("version",), 2, "version"),
    (("memory",), {"m0": 1}, "memory.m1"), (("max_length",), 100, "overflow"),
    (("constraints", "k"), 1, "constraints.k"), (("checksum",), "md5:0", "checksum"),
    # consistent edits: every field valid, the checksum no longer the content's
    (("world_size",), 4, "checksum"), (("epochs",), 6, "checksum"),
    (("profile", "name"), "other", "checksum"), (("optimality", "lower_bound"), 1.0, "checksum"),
])
def test_each_tampered_field_is_named(path, value, named):
    with pytest.raises(BucketoptError) as err:
        validate_plan(mutate(PLAN, path, value), "p.json")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"p.json: field `{named}` ")


def test_an_edited_plan_is_refused_by_its_checksum():
    edited = mutate(PLAN, ("boundaries", 0), PLAN["boundaries"][0] + 1)
    assert PLAN["token_budget"] // edited["boundaries"][0] == edited["batch_sizes"][0]
    with pytest.raises(BucketoptError, match="field `checksum` does not match the plan's "
                                             "content: the plan was edited or corrupted"):
        load_plan(edited)
    from bucketopt.plan import plan_checksum

    edited["checksum"] = plan_checksum(edited)  # re-sealed: a plan bucketopt reads as given
    assert load_plan(edited) == edited


def test_unknown_fields_and_missing_fields_are_refused():
    with pytest.raises(BucketoptError, match="field `extra` is not a field"):
        validate_plan({**PLAN, "extra": 1})
    with pytest.raises(BucketoptError, match="field `predictions.more` is not a field"):
        validate_plan(mutate(PLAN, ("predictions", "more"), 1))
    plan = dict(PLAN)
    del plan["fingerprint"]
    with pytest.raises(BucketoptError, match="field `fingerprint` is missing"):
        validate_plan(plan)
    with pytest.raises(BucketoptError, match="must be a dict"):
        load_plan(42)


def test_plan_files_bom_nan_size_and_nesting(tmp_path):
    text = json.dumps(PLAN)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert read_plan(bom) == PLAN
    for name, body in (("nan.json", text.replace('"epochs": 1', '"epochs": NaN')),
                       ("inf.json", text.replace('"alpha": 0.1', '"alpha": Infinity')),
                       ("huge.json", text.replace('"epochs": 1', '"epochs": ' + "9" * 5000)),
                       ("deep.json", "[" * 100_000 + "]" * 100_000),
                       ("bad.json", text[:-3]), ("list.json", "[]")):
        path = tmp_path / name
        path.write_text(body)
        with pytest.raises(BucketoptError) as err:
            read_plan(path)
        assert "\n" not in str(err.value) and name in str(err.value)
    big = tmp_path / "big.json"
    big.write_text(" " * (PLAN_BYTES + 1))
    with pytest.raises(BucketoptError, match="bytes"):
        read_plan(big)
    with pytest.raises(BucketoptError):
        read_plan(tmp_path / "missing.json")


def test_the_cli_refuses_a_bad_plan_in_one_line(tmp_path, lens_file, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(mutate(PLAN, ("pad",), "none")))
    for argv in (["export", "--plan", path, "-f", "nemo"],
                 ["compare", "--plan", path, "--lens", lens_file]):
        code, out, err = run(argv, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1 and "field `pad`" in err
    code, _, err = run(["solve", "--lens", lens_file, "-k", "3", "-o", lens_file], capsys)
    assert code == 2 and "destroy the input" in err


def test_compare_scores_a_memory_plan_as_planned():
    from bucketopt.training.compare import compare

    memory = {"m0": 1e9, "m1": 2e4, "m2": 2.0, "capacity": 8e9}
    sol = bucketopt.solve(LENGTHS, 3, pad="batch", memory=memory, profile=PROFILE,
                          world_size=2)
    plan = sol.to_plan()
    comparison = compare(LENGTHS, None, plan=plan, diversity=False, memory=memory)
    row = comparison.strategies["bucketed"]
    assert list(row["boundaries"]) == list(sol.boundaries)
    assert row["plan"]["batch_sizes"] == list(sol.batch_sizes)
    assert row["plan"]["ktok_per_s"] == pytest.approx(sol.ktok_per_s, rel=1e-12)
    assert comparison.token_budget == max(b * e for b, e in zip(sol.batch_sizes,
                                                                sol.boundaries))
    assert comparison.memory is None and comparison.k == 3
