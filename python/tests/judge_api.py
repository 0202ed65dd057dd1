"""attncheck.judge and attncheck.check from Python (ctest python.judge_api): a golden's own answers pass; one
element moved fails, and the verdict says which tensor, where, and by how much; a torch layer's answer through
check(); a golden outside a statement is not_stated without calling the layer; bad input is BadInput.

    python3 judge_api.py GOLDEN DECODE_GOLDEN TP2_GOLDEN      (ATTNCHECK_COMMAND: the attncheck command)

The promises of a statement are the C++ run step's (compare --supports): a stated part declined, per-rank
gradients missing where tensor-parallel is stated, and a part not stated declined on the layer's behalf.
"""
import sys

import h5py
import numpy as np

import attncheck


def expect(condition, what):
    if not condition:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


def answers_of(golden):
    with h5py.File(golden, "r") as h5:
        names = []
        h5["expected"].visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        return {name: h5["expected"][name][()] for name in names}


def promises(decode_golden, tp2_golden):
    everything = attncheck.Capabilities("all")
    decode = answers_of(decode_golden)
    without_decode = {name: value for name, value in decode.items() if name != "decode/out"}
    declines = attncheck.Candidate(tensors=without_decode, declined={"decode": "no KV cache here"})
    verdict = attncheck.check(lambda case: declines, decode_golden, supports=everything)
    expect(verdict.verdict == "broken_promise" and "decode" in verdict.message,
           f"declining decode it states is a broken promise ({verdict.message})")
    verdict = attncheck.check(lambda case: without_decode, decode_golden,
                              supports=attncheck.Capabilities("all", without=("decode",)))
    expect(verdict.verdict == "pass_with_declined" and [t.status for t in verdict.tensors if t.name == "decode/out"]
           == ["declined"], f"decode not stated: declined on its behalf, never a pass ({verdict.verdict})")
    ranks = answers_of(tp2_golden)
    verdict = attncheck.check(lambda case: ranks, tp2_golden, supports=everything)
    expect(verdict.verdict == "pass" and any(t.name.startswith("ranks/1/") for t in verdict.tensors),
           f"per-rank gradients under their golden names are judged ({verdict.verdict})")
    full_only = {name: value for name, value in ranks.items() if not name.startswith("ranks/")}
    verdict = attncheck.check(lambda case: full_only, tp2_golden, supports=everything)
    expect(verdict.verdict == "broken_promise" and "per-rank" in verdict.message,
           f"no per-rank gradients where tensor-parallel is stated: a broken promise ({verdict.message})")
    moved = dict(ranks)
    moved["ranks/1/grads/q_proj"] = ranks["ranks/1/grads/q_proj"] + 1e-3
    verdict = attncheck.check(lambda case: moved, tp2_golden, supports=everything)
    expect(verdict.verdict == "fail" and [t.name for t in verdict.failing] == ["ranks/1/grads/q_proj"]
           and verdict.failing[0].ranks == [1], f"a rank's gradient moved fails there: {verdict.explain()}")


def main():
    golden = sys.argv[1]
    with h5py.File(golden, "r") as h5:
        answers = {name: h5["expected"][name][()] for name in ("out", "grads/x", "grads/q_proj", "grads/k_proj",
                                                                "grads/v_proj", "grads/o_proj")}
    verdict = attncheck.judge(golden, answers)
    expect(verdict.passed and verdict.verdict == "pass" and len(verdict.tensors) == 6,
           f"its answers pass: {verdict.explain()}")
    moved = dict(answers)
    moved["out"] = answers["out"].copy()
    moved["out"][1, 3, 5] += 1e-3
    verdict = attncheck.judge(golden, moved)
    failing = verdict.failing
    expect(not verdict.passed and verdict.verdict == "fail" and [t.name for t in failing] == ["out"],
           "one element moved fails out alone")
    expect(failing[0].worst_index == [1, 3, 5] and failing[0].batch_rows == [1] and failing[0].positions == [3],
           f"localised to batch 1, position 3: {verdict.explain()}")
    try:
        verdict.assert_passed()
        expect(False, "assert_passed raises")
    except AssertionError as error:
        expect("out: " in str(error) and "worst at [1, 3, 5]" in str(error), f"assert_passed says where: {error}")
    verdict = attncheck.check(lambda case: answers, golden, supports=["gqa", "explicit-head-dim", "rope-half-split",
                                                                      "causal", "backward"])
    expect(verdict.passed, f"check() of a layer answering the golden's answers passes: {verdict.explain()}")
    called = []
    verdict = attncheck.check(lambda case: called.append(case) or answers, golden,
                              supports=["gqa", "rope-half-split", "causal", "backward"])
    expect(verdict.verdict == "not_stated" and not called and "explicit-head-dim" in verdict.message,
           f"outside the statement: not stated, the layer not called ({verdict.message})")
    try:
        attncheck.judge(golden, {"grads/x": np.zeros(3)})
        expect(False, "a candidate without out is refused")
    except attncheck.BadInput as error:
        expect("out" in str(error), f"a candidate without out is BadInput: {error}")
    try:
        attncheck.judge(golden + ".missing", answers)
        expect(False, "a missing golden is refused")
    except attncheck.BadInput as error:
        expect(".missing" in str(error), f"a missing golden is BadInput naming it: {str(error)[:200]}")
    promises(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
