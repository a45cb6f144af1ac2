#!/usr/bin/env python3
"""neurokit2's Kubios artefact correction (signal_fixpeaks, method="Kubios") on the very series hr-gateway's
benchmark corrupted (hr-gateway-bench artifacts-export DIR), scored the same way, printed beside hr-gateway's.

  neurokit_side.py DIR

Detection is neurokit2's first pass (a non-iterative call); the corrected series is the iterative one. A flag finds an
injected artefact when it falls within one interval of the artefact's span (the interval ending at
a flagged peak is the one flagged); false alarms are flagged intervals that find none. RMSSD and DFA alpha1
(fractal_dfa, boxes 4-16) of the corrected series are compared with the clean series'.
"""
import csv
import os
import sys
import warnings

import neurokit2 as nk
import numpy as np

warnings.filterwarnings("ignore")
DIR = sys.argv[1] if len(sys.argv) > 1 else "/tmp/artifacts"


def column(path, name="rr_ms"):
    with open(path) as f:
        return [float(r[name]) for r in csv.DictReader(f)]


def rmssd(rr):
    d = np.diff(rr)
    return float(np.sqrt(np.mean(d * d)))


def alpha1(rr):
    a, _ = nk.fractal_dfa(np.asarray(rr), scale=np.arange(4, 17))
    return float(a)


def score(flagged, artifacts):
    found, used = 0, set()
    for a in artifacts:
        hits = {i for i in flagged if a["first"] - 1 <= i <= a["last"] + 1}
        found += bool(hits)
        used |= hits
    return found, len(set(flagged) - used)


def main():
    clean = column(os.path.join(DIR, "clean.csv"))
    clean_rmssd, clean_a1 = rmssd(clean), alpha1(clean)
    ours = {int(r["seed"]): r for r in csv.DictReader(open(os.path.join(DIR, "hr-gateway.csv")))}
    print(f"Injected artefacts, side by side: hr-gateway (--correct median) and neurokit2 {nk.__version__} "
          f"signal_fixpeaks(method=\"Kubios\", iterative=True) on the same 10 series")
    print(f"clean: {len(clean)} beats, RMSSD {clean_rmssd:.2f} ms, alpha1 {clean_a1:.3f}")
    print("  seed | hr-gateway: found  false  RMSSD err  alpha1 err | neurokit2: found  false  RMSSD err  alpha1 err")
    totals = dict(ours_found=0, ours_false=0, nk_found=0, nk_false=0, ours_ok=0, nk_ok=0)
    for seed in range(1, 11):
        rr = column(os.path.join(DIR, f"seed{seed}.csv"))
        with open(os.path.join(DIR, f"seed{seed}_artifacts.csv")) as f:
            artifacts = [{"kind": r["kind"], "first": int(r["first"]), "last": int(r["last"])} for r in csv.DictReader(f)]
        # Peaks on a 1 kHz grid (the RR are whole or near-whole ms), the first beat at 0.
        peaks = np.concatenate([[0], np.cumsum(np.round(rr).astype(int))])
        info, fixed = nk.signal_fixpeaks(peaks, sampling_rate=1000, method="Kubios", iterative=True)
        # With iterative=True, info holds the last pass's findings (few are left by then); the detection is the
        # first pass's, which a non-iterative call returns.
        info, _ = nk.signal_fixpeaks(peaks, sampling_rate=1000, method="Kubios", iterative=False)
        flagged_peaks = sorted(set(info["ectopic"]) | set(info["missed"]) | set(info["extra"]) | set(info["longshort"]))
        flagged = [int(p) - 1 for p in flagged_peaks]  # interval i ends at peak i + 1
        found, false = score(flagged, artifacts)
        corrected = np.diff(np.asarray(fixed, dtype=float))
        e = 100 * (rmssd(corrected) / clean_rmssd - 1)
        a = alpha1(corrected) - clean_a1
        o = ours[seed]
        of, oi, ofa = int(o["found"]), int(o["injected"]), int(o["false_alarms"])
        oe, oa = float(o["rmssd_err_pct"]), float(o["alpha1_err"])
        print(f"  {seed:4d} |            {of:2d}/{oi:2d}  {ofa:5d}  {oe:+8.2f} %  {oa:+9.3f} |"
              f"           {found:2d}/{len(artifacts):2d}  {false:5d}  {e:+8.2f} %  {a:+9.3f}")
        totals["ours_found"] += of
        totals["ours_false"] += ofa
        totals["nk_found"] += found
        totals["nk_false"] += false
        totals["ours_ok"] += (of >= 29 and abs(oe) <= 2 and abs(oa) <= 0.03)
        totals["nk_ok"] += (found >= 29 and abs(e) <= 2 and abs(a) <= 0.03)
    print(f"  total: hr-gateway {totals['ours_found']}/300 found, {totals['ours_false']} false alarms, "
          f"{totals['ours_ok']}/10 runs meet every target; neurokit2 {totals['nk_found']}/300 found, "
          f"{totals['nk_false']} false alarms, {totals['nk_ok']}/10 runs meet every target "
          "(per run: >= 29/30 found, RMSSD within 2 %, alpha1 within 0.03)")


if __name__ == "__main__":
    main()
