"""Issue 43: the cluster in a browser. A real headless Chromium logs in through `convoy ui`'s
one-time URL (and through a pasted token), sees a job listed live, its page's three charts
grow while it trains and its end (SUCCEEDED), a failed job's root cause, what a viewer may and
may not do (no cancel button; a forged cancel is refused 403), user strings drawn as text, and
sessions ended by logout and by revoking the token. Screenshots of each page are written."""

import json
import time

import pytest
from selenium.common.exceptions import (NoAlertPresentException, NoSuchElementException,
                                        StaleElementReferenceException)
from selenium.webdriver.common.by import By

from cluster import trainer_spec, wait_for
from conftest import shot

XSS = "<img src=x onerror=alert(1)>"


def path_of(driver):
    return driver.execute_script("return location.pathname")


def text(driver, css):
    """The rendered text of the first element `css` selects, or "" (read in one step: the
    live pages redraw their parts)."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css)


def points(driver, chart):
    return int(driver.execute_script(
        "const e = document.getElementById(arguments[0]); return e ? e.dataset.points || 0 : 0;",
        f"chart-{chart}"))


def click(driver, css):
    """Clicks what `css` selects as the page is now (a live page redraws its rows: an element
    found a moment ago may be gone)."""
    wait_for(lambda: driver.execute_script(
        "const e = document.querySelector(arguments[0]);"
        "if (!e || e.disabled) return false; e.click(); return true;", css), 20, f"{css} to click")


def press(driver, element_id):
    """Clicks the element with this id as a person would (a real click: a dialog it opens stays
    open); False while it is missing or was just redrawn."""
    try:
        driver.find_element(By.ID, element_id).click()
        return True
    except (NoSuchElementException, StaleElementReferenceException):
        return False


def fetch(driver, method, path, csrf=True):
    """A request from the page itself (same origin, the session's cookie), as a script on
    it could send; with `csrf`, the session's CSRF token too. Returns (status, body)."""
    return driver.execute_async_script("""
        const [method, path, withCsrf, done] = arguments;
        (async () => {
          const me = await (await fetch('/api/session')).json();
          const headers = {'Content-Type': 'application/json'};
          if (withCsrf) headers['X-CSRF-Token'] = me.csrf;
          const r = await fetch(path, {method, headers, body: method === 'GET' ? undefined : '{}'});
          done([r.status, await r.text()]);
        })().catch((e) => done([0, String(e)]));
    """, method, path, csrf)


def log_in(driver, cluster, token, job=None):
    driver.get(cluster.ui_url(token, job))
    want = f"/jobs/{job}" if job else "/jobs"
    wait_for(lambda: path_of(driver) == want and text(driver, "#who"), 20, f"logged in at {want}")
    # The one-time code left the address bar.
    assert "code=" not in driver.current_url


def no_alert(driver):
    try:
        driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def test_owner_sees_the_job_listed_live_and_its_charts_grow_until_it_succeeds(cluster, browser):
    alice = cluster.make_token("user", user="alice")
    log_in(browser, cluster, alice)
    assert text(browser, "#who").startswith("alice")
    # Submitted after the page loaded: the list shows it without a reload.
    job = cluster.submit_as(alice, trainer_spec(name="fmnist-ui", max_steps=400))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f'tr[data-job="{job}"]'), 20,
             "the job in the live list")
    wait_for(lambda: "RUNNING" in text(browser, f'tr[data-job="{job}"]'), 60, "RUNNING in the list")
    shot(browser, "jobs")

    # In one step (click()): the live list redraws its rows, and a link found by one call can
    # be gone by the next (StaleElementReferenceException).
    click(browser, f'tr[data-job="{job}"] a[href="/jobs/{job}"]')
    wait_for(lambda: path_of(browser) == f"/jobs/{job}" and
             browser.execute_script("return document.body.dataset.rendered === '1'"), 20,
             "the job page")
    assert browser.find_elements(By.ID, "cancel"), "the owner may cancel a running job"
    # The charts grow while it trains (over its live stream, no reload).
    wait_for(lambda: points(browser, "loss") > 0, 60, "the first loss points")
    first = points(browser, "loss"), points(browser, "rate")
    wait_for(lambda: points(browser, "loss") > first[0] + 5 and points(browser, "rate") > first[1],
             60, "more points while it runs")
    assert text(browser, "#job-state") == "RUNNING"
    wait_for(lambda: text(browser, "#job-state") == "SUCCEEDED", 180, "SUCCEEDED on the page")
    wait_for(lambda: points(browser, "accuracy") >= 1, 20, "the test accuracy")
    assert points(browser, "loss") > first[0]
    # Every chart drew with uPlot (a canvas each), and the log follows for the owner.
    assert len(browser.find_elements(By.CSS_SELECTOR, ".chart canvas")) == 3
    wait_for(lambda: "test accuracy" in text(browser, "#log"), 20, "rank 0's log")
    assert not browser.find_elements(By.ID, "cancel")
    browser.set_window_size(1360, 1800)  # the whole page: charts, events, the log
    time.sleep(0.5)  # the charts follow the new width
    shot(browser, "job")


def test_a_failed_job_shows_its_root_cause_and_user_strings_as_text(cluster, browser):
    alice = cluster.make_token("user", user="alice")
    # A job name is [A-Za-z0-9._-]: the markup is refused at submit, naming the field.
    r = cluster.cli("submit", "--name", XSS, "--", "true", token=alice, check=False)
    assert r.returncode == 2 and "name" in r.stderr, r.stderr
    # ... so it goes everywhere else a user writes: the command, the env, stderr, the log.
    job = cluster.submit_as(alice, {
        "name": "fails", "nodes": 1, "procs_per_node": 1, "env": {"NOTE": XSS},
        "command": ["sh", "-c", f"echo '{XSS} went wrong' >&2; exit 7", XSS]})
    cluster.wait_state(job, "FAILED", timeout=60)
    log_in(browser, cluster, alice, job)
    wait_for(lambda: text(browser, "#job-state") == "FAILED", 20, "FAILED")
    cause = text(browser, ".root-cause")
    assert "exit" in cause and "7" in cause, cause
    stderr = text(browser, "pre.stderr")
    assert f"{XSS} went wrong" in stderr, stderr
    main = browser.find_element(By.ID, "main")
    assert XSS in main.text  # the command and the env, as written
    assert not main.find_elements(By.TAG_NAME, "img"), "user text became markup"
    wait_for(lambda: XSS in text(browser, "#log"), 20, "the log, as text")
    time.sleep(0.5)  # an onerror would have fired by now
    assert no_alert(browser)
    shot(browser, "job-failed")


def test_a_viewer_sees_no_cancel_and_a_forged_cancel_is_refused(cluster, browser):
    alice = cluster.make_token("user", user="alice")
    job = cluster.submit_as(alice, {"name": "waits", "nodes": 3, "procs_per_node": 1,
                                    "env": {"SECRET": "hunter2"}, "command": ["true"]})
    cluster.wait_state(job, "PENDING")
    viewer = cluster.make_token("viewer", user="vic")
    # The login page takes a pasted token.
    browser.get(cluster.base() + "/jobs")
    # The path changes before the page's script has drawn the form: wait for the form too.
    wait_for(lambda: path_of(browser) == "/login" and browser.find_elements(By.ID, "token"), 20,
             "the login page")
    browser.find_element(By.ID, "token").send_keys(viewer)
    browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait_for(lambda: path_of(browser) == "/jobs" and text(browser, "#who"), 20, "logged in")
    assert text(browser, "#who").startswith("vic")
    browser.get(f"{cluster.base()}/jobs/{job}")
    wait_for(lambda: text(browser, "#job-state") == "PENDING", 20, "the job page")
    assert not browser.find_elements(By.ID, "cancel"), "a viewer has no cancel button"
    assert "hunter2" not in browser.find_element(By.ID, "main").text
    assert "(redacted)" in browser.find_element(By.ID, "main").text
    assert "owner and admins" in text(browser, "#logs")
    shot(browser, "job-as-viewer")
    # What the page's own scripts could send: refused by the server, with and without CSRF.
    for csrf in (True, False):
        status, body = fetch(browser, "POST", f"/api/jobs/{job}/cancel", csrf)
        assert status == 403, (status, body)
    status, body = fetch(browser, "POST", "/api/workers/w1/drain")
    assert status == 403, (status, body)
    assert cluster.status(job)["state"] == "PENDING"
    # The queue says why it waits; the workers page has no drain button for a viewer.
    browser.get(cluster.base() + "/queue")
    wait_for(lambda: job in text(browser, "#queue-body"), 20, "the queue")
    assert "needs 3 workers" in text(browser, "#queue-body"), text(browser, "#queue-body")
    shot(browser, "queue")
    browser.get(cluster.base() + "/workers")
    wait_for(lambda: "w1" in text(browser, "#workers-body"), 20, "the workers")
    assert not browser.find_elements(By.CSS_SELECTOR, "#workers-body button")

    # The owner cancels it from its page.
    browser.delete_all_cookies()
    log_in(browser, cluster, alice, job)
    wait_for(lambda: press(browser, "cancel"), 20, "the owner's cancel button")
    browser.switch_to.alert.accept()
    wait_for(lambda: text(browser, "#job-state") == "CANCELLED", 20, "CANCELLED on the page")
    assert cluster.status(job)["state"] == "CANCELLED"


def test_an_admin_drains_and_undrains_a_worker(cluster, browser):
    admin = cluster.make_token("admin", user="ada")
    log_in(browser, cluster, admin)
    browser.get(cluster.base() + "/workers")
    row = 'tr[data-worker="w2"]'
    click(browser, f"{row} button.drain")
    wait_for(lambda: "DRAINED" in text(browser, row), 20, "DRAINED")
    assert any(w["name"] == "w2" and w.get("drained") for w in cluster.workers())
    shot(browser, "workers")
    click(browser, f"{row} button.undrain")
    wait_for(lambda: "DRAINED" not in text(browser, row), 20, "undrained")
    assert not any(w["name"] == "w2" and w.get("drained") for w in cluster.workers())


def test_logout_and_revocation_end_the_session(cluster, browser):
    alice = cluster.make_token("user", user="alice")
    log_in(browser, cluster, alice)
    browser.find_element(By.ID, "logout").click()
    wait_for(lambda: path_of(browser) == "/login", 20, "the login page after logout")
    browser.get(cluster.base() + "/jobs")
    wait_for(lambda: path_of(browser) == "/login", 20, "no session after logout")
    status, _ = fetch(browser, "GET", "/api/jobs", False)
    assert status == 401

    # Revoking the token: the open page's stream ends and it goes to the login page.
    bob = cluster.make_token("user", user="bob")
    log_in(browser, cluster, bob)
    cluster.admin("token", "revoke", "bob")
    wait_for(lambda: path_of(browser) == "/login", 20, "the login page after revocation")
    shot(browser, "login")
    status, _ = fetch(browser, "GET", "/api/jobs", False)
    assert status == 401
    # A used login link does not work twice.
    url = cluster.ui_url(alice)
    browser.get(url)
    wait_for(lambda: path_of(browser) == "/jobs", 20, "logged in again")
    browser.delete_all_cookies()
    browser.get(url)
    wait_for(lambda: "used already" in text(browser, "#login-error"), 20, "a spent link refused")
