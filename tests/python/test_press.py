"""The torch press (pyramidkv.press) on the project's model against the C
runtime of bench/model: on model_eval's first pass-key prompts, at budget
1/4, the kept positions of every (layer, KV head) after the prefill and
after each of 4 greedy decode steps, and the decoded tokens, equal those of
pkm_kept_dump (the runtime of pkm_cache.c). Skipped without torch. Run by
ctest (test_python_press)."""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir, "bench",
                                      "python"))


@pytest.fixture(scope="module")
def pm():
    dump = os.environ.get("PKM_KEPT_DUMP")
    if not dump:
        pytest.skip("PKM_KEPT_DUMP (the pkm_kept_dump program) is not set")
    sys.path.append(BENCH)
    import press_model
    torch.set_num_threads(1)
    m = press_model.load_pkvm(os.path.join(press_model.MODEL_DIR, "data",
                                           "model.pkvm"))
    text = open(os.path.join(press_model.MODEL_DIR, "data", "heldout.txt"),
                "rb").read()
    return press_model, m, text, dump


def test_pkvm_reader_reproduces_torch_reference(pm):
    """The reader loads the weights the committed reference logits came
    from: the first reference prompt's last logits agree."""
    press_model, m, _, _ = pm
    import struct
    import numpy as np
    raw = open(os.path.join(press_model.MODEL_DIR, "data", "ref_logits.bin"),
               "rb").read()
    assert raw[:4] == b"PKVR"
    n = struct.unpack_from("<I", raw, 12)[0]
    prompt = raw[16:16 + n]
    ref = np.frombuffer(raw, "<f4", n * 256, 16 + n).reshape(n, 256)
    logits, *_ = press_model.prefill(m, torch.tensor([list(prompt)]))
    assert np.abs(logits[0].numpy() - ref[-1]).max() <= 1e-3 * max(
        1.0, float(np.abs(ref[-1]).max()))


@pytest.mark.parametrize("method,prompts", [(0, 2), (2, 1), (9, 1)],
                         ids=["snapkv", "pyramidkv-r4", "h2o"])
def test_press_keeps_what_the_c_runtime_keeps(pm, method, prompts):
    press_model, m, text, dump = pm
    _, scorer, sched, sp, sinks = press_model.METHODS[method]
    budget, obs, pool = 128, 16, 7
    recent = budget // 4
    plen = 512 - 1 - 5
    c = m.c
    press = press_model.KVPress(
        c["n_layers"], c["n_kv_heads"], c["n_heads"] // c["n_kv_heads"],
        budget, schedule=sched, schedule_params=sp, scorer=scorer,
        recent_window=recent, obs_window=obs, pool_kernel=pool, sinks=sinks,
        max_len=plen + 8)
    try:
        for prompt, _ in press_model.needle_prompts(text, prompts, plen):
            blocks, toks, _, _ = press_model.run_prompt(m, press, prompt, 4,
                                                        obs)
            cb, ctoks = press_model.c_runtime(dump, method, budget, recent,
                                              obs, pool, 1, 4, prompt)
            assert [b[0] for b in blocks] == [b[0] for b in cb]
            for (label, d1), (_, d2) in zip(blocks, cb):
                for k in d2:
                    assert d1[k] == d2[k], (label, k)
            assert toks == ctoks
    finally:
        press.close()


def test_press_from_queries_keeps_what_attention_rows_keep(pm):
    """The press given the observation window's queries (scored by the
    library, pb_qk_attention) keeps what it keeps from torch's attention
    rows, on model_eval's first prompt."""
    import pyramidkv.runtime as rt
    if not rt.available():
        pytest.skip("the loaded library has no pyramidkv_runtime.h")
    press_model, m, text, _ = pm
    press = press_model.KVPress(8, 3, 2, 128, schedule="uniform",
                                recent_window=32, obs_window=16,
                                pool_kernel=7, max_len=520)
    try:
        prompt, _ = press_model.needle_prompts(text, 1, 506)[0]
        qs = []
        _, ks, _, ps = press_model.prefill(m, torch.tensor([list(prompt)]), qs)
        press.reset()
        a = press.kept_after_prefill([p[:, :, -16:, :] for p in ps])
        press.reset()
        b = press.kept_after_prefill(None, [q[:, :, -16:, :] for q in qs],
                                     ks, scale=1.0)
        for l in range(8):
            for kv in range(3):
                assert a[0][l][kv].tolist() == b[0][l][kv].tolist(), (l, kv)
    finally:
        press.close()
