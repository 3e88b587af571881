"""The web UI's weight and speed (issue 43): the bytes a page downloads, and the time to first
render of a job page whose charts hold 10,000 points each. Not a test (it asserts no time).

A secure coordinator with the UI and one worker with 20 slots; a job of 20 ranks (Python, no
training) that each report 512 training records (loss, samples/s) and 500 evaluations (the
coordinator keeps up to 512 a rank), so that the charts hold 20 x 512 = 10,240 (loss,
samples/s) and 20 x 500 = 10,000 (test accuracy) points. Then headless Chromium (as tests/browser drives it) loads the job page `--repeats`
times with a cold cache; each load's time is the page's own mark `convoy-job-rendered`
(performance.mark, set once the job, its metric history and the three uPlot charts are
drawn), counted from the navigation's start. The page's weight is the sum of each resource's
encoded size (navigation, scripts, styles, icon), apart from the API's JSON.

  bench/ui_render.py [--repeats 5] [--ranks 20] [--bin-dir DIR]
"""

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
sys.path.insert(0, os.path.join(ROOT, "tests/browser"))

RANK = r"""
import json, os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["CONVOY_METRICS_SOCKET"])
r = int(os.environ["RANK"])
lines = []
for i in range(1, 513):
    lines.append({"step": i, "epoch": 0, "loss": 2.3 / (1 + i / 50) + 0.01 * r,
                  "samples_per_s": 400 + r + (i % 7)})
for e in range(500):
    lines.append({"kind": "eval", "epoch": e, "step": 512 + e, "test_accuracy": 0.5 + e / 1200})
s.sendall("".join(json.dumps(l) + "\n" for l in lines).encode())
s.close()
"""


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ranks", type=int, default=20)
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    args = p.parse_args()
    os.environ["CONVOY_BIN_DIR"] = args.bin_dir
    import conftest  # noqa: E402  (tests/browser: the cluster with the UI, the browser's flags)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    import tempfile
    import shutil

    c = conftest.UiCluster(workers=0)
    try:
        c.start_worker("w1", slots=args.ranks)
        c.wait_workers_ready(1)
        owner = c.make_token("user", user="bench")
        job = c.submit_as(owner, {"name": "many-points", "nodes": 1, "procs_per_node": args.ranks,
                                  "command": ["/usr/bin/python3", "-c", RANK]})
        st = c.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=120)
        if st["state"] != "SUCCEEDED":
            sys.exit(f"the job {st['state']}: {st['message']}")
        metrics = json.loads(c.cli("status", job, "--output", "json", token=owner).stdout)
        hist = c.cli("plot", job, "--output", "json", token=owner).stdout
        print(f"job {job}: {args.ranks} ranks, history {len(hist)} bytes as the CLI's JSON, "
              f"state {metrics['state']}")
        home = tempfile.mkdtemp(prefix="chromium-", dir=c.dir)
        times, weights = [], []
        for i in range(args.repeats):
            options = webdriver.ChromeOptions()
            options.binary_location = conftest.CHROMIUM
            for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--window-size=1360,1000",
                        f"--user-data-dir={home}/profile-{i}",
                        f"--ignore-certificate-errors-spki-list={c.spki}"):
                options.add_argument(arg)
            service = Service(conftest.CHROMEDRIVER, env={**os.environ, "TMPDIR": home})
            d = webdriver.Chrome(service=service, options=options)
            try:
                # Log in (the link's page loads the assets), then empty the cache and open the
                # job page itself: a cold load, timed from its own navigation's start.
                d.get(c.ui_url(owner))
                deadline = time.time() + 30
                while time.time() < deadline and d.execute_script(
                        "return location.pathname") != "/jobs":
                    time.sleep(0.05)
                d.execute_cdp_cmd("Network.clearBrowserCache", {})
                d.get(f"{c.base()}/jobs/{job}")
                deadline = time.time() + 60
                while time.time() < deadline and not d.execute_script(
                        "return document.body.dataset.rendered === '1'"):
                    time.sleep(0.05)
                t = d.execute_script(
                    "return performance.getEntriesByName('convoy-job-rendered')[0].startTime")
                pts = [int(e.get_attribute("data-points")) for e in
                       d.find_elements("css selector", ".chart")]
                entries = d.execute_script("""
                    const nav = performance.getEntriesByType('navigation')[0];
                    const res = performance.getEntriesByType('resource');
                    return [[nav.name, nav.encodedBodySize, nav.transferSize]].concat(
                      res.map((r) => [r.name, r.encodedBodySize, r.transferSize]));""")
                page = sum(e[1] for e in entries if "/api/" not in e[0])
                api = sum(e[1] for e in entries if "/api/" in e[0])
                times.append(t)
                weights.append(page)
                print(f"load {i + 1}: first render {t:.0f} ms; points per chart {pts}; "
                      f"page {page} bytes, API JSON {api} bytes")
                if i == 0:
                    for name, size, _ in entries:
                        print(f"  {size:>8}  {name.split('127.0.0.1')[-1]}")
            finally:
                d.quit()
        shutil.rmtree(home, ignore_errors=True)
        print(f"first render of the job page: median {statistics.median(times):.0f} ms "
              f"(min {min(times):.0f}, max {max(times):.0f}) over {len(times)} cold loads; "
              f"page weight {weights[0]} bytes")
    finally:
        c.close()


if __name__ == "__main__":
    main()
