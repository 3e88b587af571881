"""The benchmarks' output parsers: interleaved and malformed lines are skipped, never fatal."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../bench"))
import bench_output as bo  # noqa: E402


def test_step_lines_with_and_without_the_tee_prefix():
    assert bo.parse_step("STEP 0 1 12\n") == (0, 1, 12)
    assert bo.parse_step("[default1]:STEP 1 1 3\n") == (1, 1, 3)


def test_interleaved_step_lines_are_skipped():
    # Seen under load: two ranks' tee'd lines interleaved within one line.
    for line in ["13[default0]:STEP 0 0 14", "[default1]:STEP 0 1 1[default0]:STEP 0 0 13",
                 "[default1]:STEP 0 1", "STEP 0 1 12x", "STEP a b c", "", "[default0]:",
                 "xSTEP 0 0 1", "STEP 0 0 1 2"]:
        assert bo.parse_step(line) is None, line


def test_summaries_skip_malformed_and_interleaved_lines():
    text = "\n".join([
        '[default0]:summary {"rank": 0, "world": 2, "samples_per_s": 10.5}',
        '[default1]:summary {"rank": 1, "wor[default0]:STEP 0 0 3',
        'summary {"rank": 1, "world": 2}',
        '3summary {"rank": 9}',
        'summary {"rank": 2, "world": 2}} trailing',
        'summary [1, 2]',
        'summary {not json}',
    ])
    assert [s["rank"] for s in bo.summaries(text)] == [0, 1]


def test_accuracy_lines_of_both_trainers():
    assert bo.parse_accuracy("rank 0 epoch 2: test accuracy 89.77% (loss 0.2871) at 37.5 s") == \
        (0, 2, 89.77, 37.5)
    assert bo.parse_accuracy("[default0]:rank 0 epoch 0: test accuracy 86.76% at 20.1 s") == \
        (0, 0, 86.76, 20.1)
    assert bo.parse_accuracy("rank 0 epoch 0: test accuracy 86.7[default1]:% at 1 s") is None


def test_startup_line():
    assert bo.parse_startup('startup {"main_unix": 1.5}') == {"main_unix": 1.5}
    assert bo.parse_startup('startup {"main_unix": 1.5') is None


def test_resume_lines_of_both_trainers():
    assert bo.parse_resumed("[default0]:RESUMED 1 0 300\n") == (1, 0, 300)
    assert bo.parse_resumed("RESUMED 1 0 3[default1]:RESUMED 1 1 300") is None
    assert bo.parse_trainer_resume("resumed at epoch 0, step 200") == \
        {"source": None, "path": None, "epoch": 0, "step": 200, "sample": None}
    assert bo.parse_trainer_resume(
        "resumed from snapshot /dev/shm/j 1/snap-000000000287.bin at epoch 1, step 287 "
        "(sample 18368 of the epoch)") == \
        {"source": "snapshot", "path": "/dev/shm/j 1/snap-000000000287.bin", "epoch": 1,
         "step": 287, "sample": 18368}
    assert bo.parse_trainer_resume(
        "resumed from live /dev/shm/j/live-0.state at epoch 0, step 91 (sample 2912 of the "
        "epoch)") == \
        {"source": "live", "path": "/dev/shm/j/live-0.state", "epoch": 0, "step": 91,
         "sample": 2912}
    assert bo.parse_trainer_resume("resumed from snapshot at epoch 1, step x") is None


def test_trainer_step_lines():
    assert bo.parse_trainer_step("rank 1 epoch 0 step 287/938 loss 0.4123 3512 samples/s\n") == \
        (1, 0, 287)
    assert bo.parse_trainer_step("rank 1 epoch 0 step 287/938 loss nan 3512 samples/s") == \
        (1, 0, 287)
    assert bo.parse_trainer_step("rank 1 epoch 0 step 287/9rank 0 epoch 0 step 3/9 loss 1 2 "
                                 "samples/s") is None


def test_sick_host_lines():
    assert bo.parse_sick("SICK step 0 1 12 1764380000.125\n") == \
        {"what": "step", "attempt": 0, "rank": 1, "step": 12, "time": 1764380000.125,
         "extra_s": None}
    assert bo.parse_sick("[default1]:SICK slow 0 1 30 1764380000.5 0.1234") == \
        {"what": "slow", "attempt": 0, "rank": 1, "step": 30, "time": 1764380000.5,
         "extra_s": 0.1234}
    assert bo.parse_sick("[default2]:SICK hang 1 2 30 1764380000")["what"] == "hang"
    for line in ["SICK slow 0 1 30 1764380000.5", "SICK step 0 1 12 1764380000.1 0.2",
                 "SICK step 0 1 1[default0]:SICK step 0 0 13 1764380000.1",
                 "SICK stop 0 1 12 1.0", "SICK step 0 1 12", "xSICK step 0 1 12 1.0", ""]:
        assert bo.parse_sick(line) is None, line


def test_torchrun_root_cause_rank():
    summary = "\n".join([
        "[default0]:RuntimeError: Timed out waiting 60000ms for recv operation to complete",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train_ddp.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-11-29_02:50:01",
        "  host      : box",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : 1 (pid: 4242)",
    ])
    assert bo.torchrun_root_cause_rank(summary) == 0
    # A rank line before the root cause (under "Failures:") is another failure, not it.
    other = summary.replace("  <NO_OTHER_FAILURES>", "[1]:\n  rank      : 1 (local_rank: 1)")
    assert bo.torchrun_root_cause_rank(other) == 0
    assert bo.torchrun_root_cause_rank("rank      : 0 (local_rank: 0)") is None
    assert bo.torchrun_root_cause_rank(summary.replace("rank      : 0 (local", "rank : x (l")) \
        is None
