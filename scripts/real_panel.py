#!/usr/bin/env python3
"""A real daily panel for ml-alpha: S&P 500 constituents, 2013-02-08 to 2018-02-07 (1259 trading days, 505 tickers).

Source: Cam Nugent's "S&P 500 stock data" (Kaggle dataset camnugent/sandp500, published CC0; the scraper and the
files also in github.com/CNuge/kaggle-code, MIT, at commit f110943 "data update" under
stock_data/individual_stocks_5yr/): one CSV per ticker, `date,open,high,low,close,volume,Name`, daily bars (not
adjusted for splits or dividends). Get the files either way:

    # from the GitHub repository (about 33 MB in 505 files)
    git clone https://github.com/CNuge/kaggle-code && git -C kaggle-code archive f110943 \\
        stock_data/individual_stocks_5yr | tar -x -C .
    # or from Kaggle: download camnugent/sandp500 and unzip individual_stocks_5yr.zip

then

    python3 scripts/real_panel.py stock_data/individual_stocks_5yr data/sp500.csv

writes a long-format CSV (docs/data.md) of one row per (date, ticker) that has a bar, with the columns

    date, ticker, r1, r5, r20, r60, hl, oc, vchg, vol20, fwd5

features, from the bars up to and including the row's date only:
    r1, r5, r20, r60   log(close_t / close_{t-h}), h = 1, 5, 20, 60 bars of that ticker
    hl                 log(high_t / low_t)                        (the day's range)
    oc                 log(close_t / open_t)                      (the day's body)
    vchg               log(volume_t / mean(volume over the 20 bars before t))
    vol20              the standard deviation of r1 over the last 20 bars
and the target
    fwd5               log(close_{t+5} / close_t)                 (the next 5 bars' return)
An empty cell is NaN (not enough history, a zero or missing price). A one-day move beyond ±50% in log terms
(splits: the bars are not adjusted) makes every return whose span crosses it NaN, so a split is no signal.
A ticker's dates without a bar are missing rows of the panel (before its listing, after its removal).

Only the standard library: no NumPy or pandas needed.
"""
import csv
import math
import os
import sys

HORIZONS = (1, 5, 20, 60)
FWD = 5
SPLIT_LOG = math.log(1.5)


def read_ticker(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            def num(k):
                v = r.get(k, "")
                try:
                    x = float(v)
                except ValueError:
                    return math.nan
                return x if math.isfinite(x) and x > 0 else math.nan
            rows.append((r["date"], num("open"), num("high"), num("low"), num("close"), num("volume")))
    rows.sort(key=lambda t: t[0])
    return rows


def log_ratio(a, b):
    return math.log(a / b) if (a == a and b == b) else math.nan


def features(rows):
    n = len(rows)
    close = [r[4] for r in rows]
    r1 = [math.nan] + [log_ratio(close[i], close[i - 1]) for i in range(1, n)]
    # A split or a bad print: one bar's move beyond ±50% (log) poisons every span that crosses it.
    jump = [abs(v) > SPLIT_LOG if v == v else False for v in r1]
    jumps_before = [0] * (n + 1)
    for i in range(n):
        jumps_before[i + 1] = jumps_before[i] + (1 if jump[i] else 0)

    def span_ret(i, j):  # log(close_j / close_i), i < j, NaN if a jump lies in (i, j]
        if i < 0 or j >= n or jumps_before[j + 1] - jumps_before[i + 1] > 0:
            return math.nan
        return log_ratio(close[j], close[i])

    out = []
    for t in range(n):
        date, o, h, l, c, v = rows[t]
        f = [span_ret(t - k, t) for k in HORIZONS]
        f.append(log_ratio(h, l))
        f.append(log_ratio(c, o))
        past = [rows[k][5] for k in range(max(0, t - 20), t) if rows[k][5] == rows[k][5]]
        f.append(math.log(v / (sum(past) / len(past))) if (len(past) == 20 and v == v) else math.nan)
        window = [r1[k] for k in range(t - 19, t + 1) if k >= 1 and not jump[k] and r1[k] == r1[k]]
        if t >= 20 and len(window) == 20:
            m = sum(window) / 20
            f.append(math.sqrt(sum((x - m) ** 2 for x in window) / 19))
        else:
            f.append(math.nan)
        f.append(span_ret(t, t + FWD))
        out.append((date, f))
    return out


def cell(x):
    return "" if x != x else "%.6g" % x


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: real_panel.py <folder of TICKER_data.csv files> <output.csv>")
    src, dst = sys.argv[1], sys.argv[2]
    files = sorted(f for f in os.listdir(src) if f.endswith("_data.csv"))
    if not files:
        sys.exit(src + ": no *_data.csv files (the individual_stocks_5yr folder of the S&P 500 stock data)")
    panel = {}
    for name in files:
        ticker = name[: -len("_data.csv")]
        panel[ticker] = features(read_ticker(os.path.join(src, name)))
    dates = sorted({d for rows in panel.values() for d, _ in rows})
    tmp = dst + ".tmp"
    rows_out = 0
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["date", "ticker", "r1", "r5", "r20", "r60", "hl", "oc", "vchg", "vol20", "fwd5"])
        by_date = {}
        for ticker, rows in panel.items():
            for d, feats in rows:
                by_date.setdefault(d, []).append((ticker, feats))
        for d in dates:
            for ticker, feats in sorted(by_date[d]):
                w.writerow([d, ticker] + [cell(x) for x in feats])
                rows_out += 1
    os.replace(tmp, dst)
    print("%s: %d tickers x %d dates, %d rows (%.1f%% of the panel present)" %
          (dst, len(panel), len(dates), rows_out, 100.0 * rows_out / (len(panel) * len(dates))))


if __name__ == "__main__":
    main()
