"""The web UI in a real headless Chromium (Debian's chromium + chromium-driver, driven by
python3-selenium), against a real secure cluster (tests/e2e/cluster.py) whose coordinator
serves the UI (--ui-listen). Screenshots of each page go to $CONVOY_SCREENSHOT_DIR (CTest: the
build tree's tests/browser-screenshots), else tests/browser/screenshots.

Chromium gets a profile and a TMPDIR of its own under the cluster's directory, removed with
it; it trusts exactly the coordinator's serving key (--ignore-certificate-errors-spki-list),
not every certificate."""

import base64
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from cluster import Cluster, free_port, wait_for  # noqa: E402

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - the skip says why
    webdriver = None

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = os.environ.get("CONVOY_SCREENSHOT_DIR",
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "screenshots"))


def spki_sha256(port):
    """base64 SHA-256 of the serving certificate's public key (what Chromium pins)."""
    pem = ssl.get_server_certificate(("127.0.0.1", port))
    pub = subprocess.run(["openssl", "x509", "-pubkey", "-noout"], input=pem.encode(),
                         capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub,
                         capture_output=True, check=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


class UiCluster(Cluster):
    """A secure cluster whose coordinator serves the web UI on a free loopback port."""

    def __init__(self, **kwargs):
        self.ui_port = free_port()
        super().__init__(secure=True, coordinator_extra=["--ui-listen", f"127.0.0.1:{self.ui_port}"],
                         **kwargs)
        wait_for(lambda: self._ui_up(), 20, "the web UI")
        self.spki = spki_sha256(self.ui_port)

    def _ui_up(self):
        try:
            ssl.get_server_certificate(("127.0.0.1", self.ui_port))
            return True
        except OSError:
            return False

    def ui_url(self, token, job=None):
        """`convoy ui [JOB]` as the holder of `token`: the one-time login URL."""
        args = ["ui"] + ([job] if job else [])
        url = self.cli(*args, token=token).stdout.strip()
        assert url.startswith(f"https://127.0.0.1:{self.ui_port}/login"), url
        return url

    def base(self):
        return f"https://127.0.0.1:{self.ui_port}"

    def submit_as(self, token, spec):
        """Submits `spec` (a dict) as the holder of `token`; the job's id."""
        path = os.path.join(self.dir, f"spec-{len(self.jobs)}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        job = json.loads(self.cli("submit", path, "--output", "json", token=token).stdout)["job_id"]
        self.jobs.append(job)
        return job


@pytest.fixture(scope="module")
def cluster(request):
    if webdriver is None or not CHROMIUM or not os.path.exists(CHROMEDRIVER):
        pytest.skip("needs chromium, chromium-driver and python3-selenium "
                    "(scripts/install-deps.sh installs them)")
    c = UiCluster(workers=2)
    yield c
    failed = request.session.testsfailed > 0
    if failed or os.environ.get("CONVOY_BROWSER_KEEP_LOGS"):
        c.print_logs()
    leftovers = c.close()
    if failed:
        # A failed test can leave its job running (close() killed it). Under -x this teardown
        # runs in pytest's session end, where an assertion hides the test's own report.
        print(f"after a failed test, processes of jobs killed at teardown: {leftovers}")
    else:
        assert not leftovers, f"processes of jobs survived the test: {leftovers}"


@pytest.fixture
def browser(cluster, request):
    """A fresh headless Chromium (no cookies) that trusts the coordinator's key."""
    home = tempfile.mkdtemp(prefix="chromium-", dir=cluster.dir)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1360,1000", f"--user-data-dir={home}/profile",
                f"--ignore-certificate-errors-spki-list={cluster.spki}",
                "--no-first-run", "--disable-background-networking"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    env = {**os.environ, "TMPDIR": home, "HOME": home}
    service = Service(CHROMEDRIVER, env=env, log_output=os.path.join(home, "chromedriver.log")) \
        if "log_output" in Service.__init__.__code__.co_varnames else \
        Service(CHROMEDRIVER, env=env, log_path=os.path.join(home, "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    driver.shots = []
    yield driver
    try:
        problems = [e["message"] for e in driver.get_log("browser")
                    if "Content Security Policy" in e["message"] or e["level"] == "SEVERE"
                    and "Failed to load resource" not in e["message"]]
    finally:
        driver.quit()
        shutil.rmtree(home, ignore_errors=True)
    # No page broke its own policy, and no script error.
    assert not problems, problems


def shot(driver, name):
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, f"{name}.png")
    driver.save_screenshot(path)
    return path
