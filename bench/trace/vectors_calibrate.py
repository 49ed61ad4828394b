"""Writes vectors/calibrate_measures.json: golden vectors of pyramidkv
calibrate's measures (docs/spec.md 18.4, 18.5) and of CAKE's preference
from preference records (18.2) on traces small enough to
derive by hand; each case's "why" holds the arithmetic, and the expected
figures are the exact fractions written there, not output of the tool.

    python3 bench/trace/vectors_calibrate.py > vectors/calibrate_measures.json
"""
import json
import math

E = 0.0625
WIN = [E] * 8 + [0.0, 0.0, 0.5, 0.0]  # query 11 over keys 0 .. 11
FUT_A = [0.25, 0.125] + [0.03125] * 6 + [0.25, 0.125, 0.0, 0.0625, 0.0]
FUT_B = [0.0] * 8 + [0.5, 0.0, 0.0, 0.0, 0.5]  # query 12 over keys 0 .. 12
KEPT = ("K: one window row (query 11) gives window scores s = 1/16 at 0..7, "
        "0 at 8, 9, 0.5 at 10; max pooling of width 7 over the 12 positions "
        "gives 0.5 at 7..11 and 1/16 at 0..6; position 11 is the recent "
        "window (--recent 1); the budget 4 keeps 4, so 8 of the 11 evictable "
        "go: the 7 at 1/16 (0..6) and, of the four tied at 0.5 (7..10), the "
        "lower, 7 (spec.md section 7.2: ties evict the lower position "
        "first); K = {8, 9, 10, 11}")


def rec(kind, head, row):
    return {"kind": kind, "layer": 0, "head": head, "rows": [row]}


def case(name, why, heads, records, **expect):
    row = {"schedule": "uniform", "heads": "uniform"}
    row.update(expect)
    return {"name": name, "why": why, "layers": 1, "kvHeads": heads,
            "records": records, "args": ["--budget", "4", "--recent", "1"],
            "expect": [row]}


CASES = [
    case("one head: peak, loss, recall and mass",
         KEPT + ". recall: q = 11 < 32 so all of 0..10 are heavy hitters, 3 "
         "kept: 3/11 = 0.272727272727. mass: the row's kept weight 0 + 0 + "
         "0.5 + 0 over 1: 0.5. future row f (query 12): lost = f0 + ... + "
         "f7 = 0.25 + 0.125 + 6/32 = 0.5625, seen = 1, loss = mean = 0.5625. "
         "peak: the 8 largest c_i over 0..11 are 0.25 (0, 8), 0.125 (1, 9), "
         "0.0625 (11), 1/32 at 2, 3, 4 (ties to the lower i); peak_all = "
         "0.90625, peak_lost (0, 1, 2, 3, 4) = 0.46875; peak = 0.46875 / "
         "0.90625 = 15/29 = 0.517241379310; one prompt: standard error 0",
         1, [rec("prefill", 0, WIN), rec("future", 0, FUT_A)],
         held=4, heavyHitterRecall=3 / 11, retainedAttentionMass=0.5,
         peakLoss=15 / 29, peakLossSE=0, worstHeadLoss=0.5625,
         meanLoss=0.5625, headPeakLoss=[15 / 29]),
    case("two heads pooled, not averaged",
         "both heads have the window row of the first case, so each keeps "
         "K = {8, 9, 10, 11} (uniform heads: each its share of 4). Head 0's "
         "future row as in the first case (peak_lost 0.46875, peak_all "
         "0.90625, lost/seen 0.5625); head 1's puts 0.5 on 8 and 0.5 on its "
         "own key 12: seen 1, lost 0; its 8 peak positions are 8 (0.5) and "
         "0..6 (0, ties to the lower i): peak_all 0.5, peak_lost 0. The "
         "prompt's peak pools the cells: (0.46875 + 0) / (0.90625 + 0.5) = "
         "1/3 (the mean of 15/29 and 0 would be 0.2586); worst head loss "
         "max(0.5625, 0) = 0.5625; mean (0.5625 + 0) / 2 = 0.28125; per head "
         "15/29 and 0; recall 3/11 and mass 0.5 on each head",
         2, [rec("prefill", 0, WIN), rec("prefill", 1, WIN),
             rec("future", 0, FUT_A), rec("future", 1, FUT_B)],
         held=4, heavyHitterRecall=3 / 11, retainedAttentionMass=0.5,
         peakLoss=1 / 3, peakLossSE=0, worstHeadLoss=0.5625,
         meanLoss=0.28125, headPeakLoss=[15 / 29, 0]),
    case("two prompts: the mean of the prompts' peaks and its standard error",
         "one head, two prompts, each the first case's window row (K = {8, "
         "9, 10, 11}). Prompt 0's future row is the first case's (peak "
         "15/29, loss 0.5625), prompt 1's the second case's head 1 (peak 0, "
         "loss 0). peak = (15/29 + 0) / 2 = 15/58 = 0.258620689655; sd (m - "
         "1 = 1) = sqrt((15/58)^2 x 2) = 15/58 x sqrt 2, s.e. = sd / sqrt 2 "
         "= 15/58; worst head loss the mean of 0.5625 and 0 = 0.28125, mean "
         "the same; the per-head peak pools the two prompts: 0.46875 / "
         "(0.90625 + 0.5) = 1/3",
         1, [rec("prefill", 0, WIN), rec("future", 0, FUT_A),
             rec("prefill", 0, WIN), rec("future", 0, FUT_B)],
         peakLoss=15 / 58, peakLossSE=15 / 58, worstHeadLoss=0.28125,
         meanLoss=0.28125, headPeakLoss=[1 / 3]),
]

# CAKE's P from two preference records (spec.md 18.2 and 17.1): n = 3
# keys, 2 rows, so one prefix column (p = 0) holds a = (0.5, 0.25) in text
# A and (1, 0.5) in text B.
PREF_A = [[0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]
PREF_B = [[1.0, 0.0, 0.0], [0.5, 0.25, 0.25]]
H_A = -(0.5 * math.log(0.5 + 1e-10) + 0.25 * math.log(0.25 + 1e-10))
H_B = -(1.0 * math.log(1.0 + 1e-10) + 0.5 * math.log(0.5 + 1e-10))
V_A, V_B = 2 * 0.125 ** 2, 2 * 0.25 ** 2
P_AB = (H_A ** (1 / 1.6) * V_A ** (1 / 0.6) +
        H_B ** (1 / 1.6) * V_B ** (1 / 0.6)) / 2
CASES.append({
    "name": "CAKE's preference from preference records, not the prompt",
    "why": "one prompt of one window row (its sample variance is 0, so its "
    "own P would be 0) and two preference records of the same stream, texts "
    "0 and 1, each 2 rows over 3 keys with one prefix column p = 0. Text "
    "A: a = 0.5, 0.25: H = -(0.5 ln(0.5 + 1e-10) + 0.25 ln(0.25 + 1e-10)) "
    "= ln 2 - 2e-10, V = the sample variance (0.125^2 + 0.125^2) / 1 = "
    "0.03125. Text B: a = 1, 0.5: H = -(ln(1 + 1e-10) + 0.5 ln(0.5 + "
    "1e-10)) = (ln 2) / 2 - 2e-10, V = 0.125. P = the mean over the texts "
    "of H^(1/1.6) V^(1/0.6) = (%.12g + %.12g) / 2 = %.12g" % (
        H_A ** (1 / 1.6) * V_A ** (1 / 0.6),
        H_B ** (1 / 1.6) * V_B ** (1 / 0.6), P_AB),
    "layers": 1, "kvHeads": 1,
    "records": [rec("prefill", 0, WIN), rec("future", 0, FUT_A),
                {"kind": "preference", "layer": 0, "head": 0,
                 "rows": PREF_A},
                {"kind": "preference", "layer": 0, "head": 0,
                 "rows": PREF_B}],
    "args": ["--budget", "4", "--recent", "1"],
    "expect": [{"schedule": "uniform", "heads": "uniform",
                "peakLoss": 15 / 29}],
    "cakePreference": [P_AB]})

if __name__ == "__main__":
    print(json.dumps({
        "policy": "kv-cache/calibrate", "version": 1,
        "description": "pyramidkv calibrate's measures of a row "
        "(docs/spec.md section 18.4, 18.5) on small traces given inline, "
        "every expectation derived by hand in its why; written by "
        "bench/trace/vectors_calibrate.py",
        "cases": CASES}, indent=1))
