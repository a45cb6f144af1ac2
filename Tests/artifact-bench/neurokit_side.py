#!/usr/bin/env python3
"""neurokit2's Kubios artefact correction (signal_fixpeaks, method="Kubios") on the very series hr-gateway's
benchmark corrupted (hr-gateway-bench artifacts-export DIR), scored the same way, printed beside hr-gateway's.

  neurokit_side.py DIR

The 10 series with 30 artefacts each are scored per run; those at lower densities (DIR/dN, N artefacts per series)
are summed over their 10 runs.

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


def neurokit(d, seed, clean_rmssd, clean_a1):
    """neurokit2 on one exported series of directory d: (found, injected, false alarms, RMSSD err %, alpha1 err)."""
    rr = column(os.path.join(d, f"seed{seed}.csv"))
    with open(os.path.join(d, f"seed{seed}_artifacts.csv")) as f:
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
    return (found, len(artifacts), false, 100 * (rmssd(corrected) / clean_rmssd - 1), alpha1(corrected) - clean_a1)


def densities(clean_rmssd, clean_a1):
    """The lower densities (DIR/dN): totals over the 10 runs, side by side."""
    dirs = sorted((int(n[1:]), os.path.join(DIR, n)) for n in os.listdir(DIR) if n[:1] == "d" and n[1:].isdigit())
    if not dirs:
        return
    print("By density, 10 runs each: found and false alarms over the 10 runs; runs with RMSSD within 2 %, alpha1 within "
          "0.03, and both")
    print("  per run | hr-gateway: found  false  RMSSD ok  alpha1 ok  both | neurokit2: found  false  RMSSD ok  alpha1 ok  both")
    for count, d in dirs:
        ours = list(csv.DictReader(open(os.path.join(d, "hr-gateway.csv"))))
        theirs = [neurokit(d, seed, clean_rmssd, clean_a1) for seed in range(1, 11)]
        of = sum(int(o["found"]) for o in ours)
        oi = sum(int(o["injected"]) for o in ours)
        ofa = sum(int(o["false_alarms"]) for o in ours)
        ore = sum(abs(float(o["rmssd_err_pct"])) <= 2 for o in ours)
        oal = sum(abs(float(o["alpha1_err"])) <= 0.03 for o in ours)
        ob = sum(abs(float(o["rmssd_err_pct"])) <= 2 and abs(float(o["alpha1_err"])) <= 0.03 for o in ours)
        nf = sum(t[0] for t in theirs)
        nfa = sum(t[2] for t in theirs)
        nre = sum(abs(t[3]) <= 2 for t in theirs)
        nal = sum(abs(t[4]) <= 0.03 for t in theirs)
        nb = sum(abs(t[3]) <= 2 and abs(t[4]) <= 0.03 for t in theirs)
        print(f"  {count:7d} |     {of:4d}/{oi:3d}  {ofa:5d}  {ore:5d}/10  {oal:6d}/10  {ob:4d} |"
              f"    {nf:4d}/{oi:3d}  {nfa:5d}  {nre:5d}/10  {nal:6d}/10  {nb:4d}")


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
        found, injected, false, e, a = neurokit(DIR, seed, clean_rmssd, clean_a1)
        o = ours[seed]
        of, oi, ofa = int(o["found"]), int(o["injected"]), int(o["false_alarms"])
        oe, oa = float(o["rmssd_err_pct"]), float(o["alpha1_err"])
        print(f"  {seed:4d} |            {of:2d}/{oi:2d}  {ofa:5d}  {oe:+8.2f} %  {oa:+9.3f} |"
              f"           {found:2d}/{injected:2d}  {false:5d}  {e:+8.2f} %  {a:+9.3f}")
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
    densities(clean_rmssd, clean_a1)


if __name__ == "__main__":
    main()
