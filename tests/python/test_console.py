"""The operator console in a real headless Chromium (Debian's chromium and chromedriver,
driven by Selenium): users of each role log in, filter the DLQ, open a record, redrive it
(the endpoint receives it), resolve another with a note (its history shows it), archive
one to a local directory (`archive_to`); a viewer has no action buttons. The pages are checked at 1280x800 and at 390x844, and with the
keyboard alone (Tab and Enter). Screenshots of the DLQ list, a record and an event's
history are written to docs/screenshots/ for the README.

It drives the real `hookline` binary (HOOKLINE_BIN, default target/debug/hookline) on its
own topics: `hookline dispatch` parks what a local receiver refuses, and `hookline console`
serves the pages.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from test_dlq_registry import DEADLINE_S, ROOT, Hookline, config_toml, read_records, unique_name

CHROMIUM = os.environ.get("HOOKLINE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("HOOKLINE_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOTS = ROOT / "docs" / "screenshots"
TOKENS = {
    "operator": ("alice", "operator-token-0b8e5c2f94"),
    "viewer": ("victor", "viewer-token-7a1d3e6b20"),
    "admin": ("ada", "admin-token-c4f9a0e8d1"),
}


class FlakyReceiver:
    """Answers 503 until fixed (`/flaky`), always 503 on `/broken`; counts 2xx answers by
    webhook-id."""

    def __init__(self):
        self.fixed = threading.Event()
        self.delivered = {}
        lock = self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                ok = self.path.endswith("/flaky") and outer.fixed.is_set()
                if ok:
                    with lock:
                        key = self.headers.get("webhook-id")
                        outer.delivered[key] = outer.delivered.get(key, 0) + 1
                self.send_response(200 if ok else 503)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, event_id):
        with self.lock:
            return self.delivered.get(event_id, 0)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def stop(process, log):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert code == 0, f"exited {code}:\n" + log.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Parked records (two for ep-flaky, one for ep-broken) and a console over them."""
    tmp = tmp_path_factory.mktemp("console")
    h = Hookline(unique_name("py-console"))
    receiver = FlakyReceiver()
    h.run("topics", "create", "--tiers", "200ms")
    h.run("endpoints", "put", "ep-flaky", "--url", f"{receiver.base}/flaky", "--generate-secret")
    h.run("endpoints", "put", "ep-broken", "--url", f"{receiver.base}/broken", "--generate-secret")
    dispatcher_config = tmp / "dispatcher.toml"
    dispatcher_config.write_text(config_toml(h))
    dispatcher_log = tmp / "dispatcher.log"
    with open(dispatcher_log, "wb") as stderr:
        dispatcher = subprocess.Popen(
            h.args("dispatch", "--config", str(dispatcher_config)),
            stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, "RUST_LOG": "info"},
        )
    console = None
    try:
        events = {
            "flaky-a": h.publish("ep-flaky", json.dumps({"invoice": 1, "email": "jane@example.com"}))[0],
            "flaky-b": h.publish("ep-flaky", json.dumps({"invoice": 2}))[0],
            "broken": h.publish("ep-broken", json.dumps({"invoice": 3}))[0],
        }
        read_records(h.dlq, 3)

        users = []
        for role, (name, token) in TOKENS.items():
            hashed = subprocess.run(
                [str(h.bin), "console", "hash-token"], input=token, capture_output=True,
                text=True, timeout=DEADLINE_S,
            )
            assert hashed.returncode == 0, hashed.stderr
            assert token not in hashed.stdout
            users.append(f'[[console.users]]\nname = "{name}"\nrole = "{role}"\n'
                         f'token_hash = "{hashed.stdout.strip()}"\n')
        key_file = tmp / "session.key"
        key_file.write_text(os.urandom(32).hex())
        archive = tmp / "archive"
        console_config = tmp / "console.toml"
        console_config.write_text(
            f'[console]\nsession_key = "${{file:{key_file}}}"\npage_size = 20\n'
            f'archive_to = "file://{archive}/"\n\n' + "\n".join(users)
        )
        console_log = tmp / "console.log"
        log_out = open(console_log, "w")
        console = subprocess.Popen(
            h.args("console", "--config", str(console_config), "--listen", "127.0.0.1:0"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        url = None
        give_up = time.monotonic() + DEADLINE_S
        while url is None:
            assert time.monotonic() < give_up, "the console never said where it listens"
            line = console.stderr.readline()
            assert line, f"the console exited: {console.wait()}"
            found = re.search(r"hookline console on (http://\S+)/", line)
            url = found.group(1) if found else None
        # Keep draining its stderr into the log.
        threading.Thread(target=lambda: shutil.copyfileobj(console.stderr, log_out), daemon=True).start()
        yield {"url": url, "events": events, "receiver": receiver, "h": h, "archive": archive}
    finally:
        if console is not None:
            console.send_signal(signal.SIGTERM)
            console.wait(timeout=30)
        stop(dispatcher, dispatcher_log)
        receiver.close()


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="hookline-chromium-")
    for arg in [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,800",
        "--hide-scrollbars",
    ]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_window_size(1280, 800)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(what, check, deadline=DEADLINE_S):
    give_up = time.monotonic() + deadline
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.2)


def tab_to(driver, element_id, limit=150):
    """Presses Tab until the element with `element_id` has the focus (fails after `limit`)."""
    for _ in range(limit):
        active = driver.switch_to.active_element
        if active.get_attribute("id") == element_id:
            return active
        ActionChains(driver).send_keys(Keys.TAB).perform()
    pytest.fail(f"#{element_id} is not reachable with Tab")


def press_enter(driver):
    ActionChains(driver).send_keys(Keys.ENTER).perform()


def login(driver, url, role):
    """Logs in with the keyboard alone: the user field has the focus, Tab moves to the
    token, Enter submits."""
    driver.delete_all_cookies()
    driver.get(f"{url}/login")
    field = driver.switch_to.active_element
    assert field.get_attribute("id") == "user", "the user field has the focus"
    field.send_keys(TOKENS[role][0], Keys.TAB)
    token = driver.switch_to.active_element
    assert token.get_attribute("id") == "token", "Tab moves to the token field"
    token.send_keys(TOKENS[role][1], Keys.ENTER)
    wait_for("the DLQ page", lambda: driver.current_url.startswith(f"{url}/dlq"))
    assert driver.find_element(By.ID, "whoami").text == f"{TOKENS[role][0]} · {role}"


def shot(driver, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(SCREENSHOTS / name))


def ids_present(driver, *ids):
    present = []
    for element_id in ids:
        try:
            driver.find_element(By.ID, element_id)
            present.append(element_id)
        except NoSuchElementException:
            pass
    return present


def test_a_bad_token_is_refused(stack, browser):
    browser.get(f"{stack['url']}/login")
    browser.find_element(By.ID, "user").send_keys(TOKENS["operator"][0])
    browser.find_element(By.ID, "token").send_keys("not-a-token-of-anyone", Keys.ENTER)
    error = wait_for("the refusal", lambda: ids_present(browser, "login-error"))
    assert error
    assert "not valid" in browser.find_element(By.ID, "login-error").text
    browser.get(f"{stack['url']}/dlq")
    assert "/login" in browser.current_url


def test_an_operator_filters_redrives_and_resolves_with_the_keyboard(stack, browser):
    url, events, receiver = stack["url"], stack["events"], stack["receiver"]
    login(browser, url, "operator")
    rows = browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    assert len(rows) == 3

    # Filter by endpoint with the keyboard: Tab to the field, type, Enter.
    field = tab_to(browser, "f-endpoint")
    field.send_keys("ep-flaky", Keys.ENTER)
    wait_for("the filtered list", lambda: "endpoint=ep-flaky" in browser.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    assert len(rows) == 2
    assert "2 records match" in browser.find_element(By.ID, "records-heading").text
    assert "ep-flaky" in browser.find_element(By.ID, "counts-endpoint").find_element(By.XPATH, "..").text
    shot(browser, "dlq-list.png")

    # Open a record (a link), then redrive it with Tab and Enter only.
    browser.find_element(By.LINK_TEXT, events["flaky-a"]).find_element(
        By.XPATH, "ancestor::tr").find_element(By.CSS_SELECTOR, "td a").click()
    wait_for("the record page", lambda: "/dlq/records/" in browser.current_url)
    record_url = browser.current_url
    assert events["flaky-a"] in browser.find_element(By.ID, "envelope").text
    # The original event, decoded through the registry (published as Avro).
    assert '"event_type": "invoice.paid"' in browser.find_element(By.ID, "payload").text
    shot(browser, "dlq-record.png")
    receiver.fixed.set()
    tab_to(browser, "redrive-button")
    press_enter(browser)
    wait_for("the confirmation", lambda: ids_present(browser, "confirm-summary"))
    assert "redrive 1 record" in browser.find_element(By.ID, "confirm-summary").text
    tab_to(browser, "confirm-button")
    press_enter(browser)
    wait_for("the result", lambda: ids_present(browser, "result-summary"))
    assert "Redrove 1 record" in browser.find_element(By.ID, "result-summary").text
    wait_for("the endpoint to receive the redriven event", lambda: receiver.count(events["flaky-a"]) == 1)
    browser.get(record_url)
    history = browser.find_element(By.ID, "history").text
    assert "redriven alice operator" in history, history

    # Resolve the other with a note; the note is in its history.
    browser.get(f"{url}/dlq?endpoint=ep-flaky&status=open")
    browser.find_element(By.LINK_TEXT, events["flaky-b"]).find_element(
        By.XPATH, "ancestor::tr").find_element(By.CSS_SELECTOR, "td a").click()
    wait_for("the record page", lambda: "/dlq/records/" in browser.current_url)
    other_url = browser.current_url
    browser.find_element(By.ID, "a-resolve-note").send_keys("receiver retired, see OPS-7")
    browser.find_element(By.ID, "resolve-button").click()
    wait_for("the confirmation", lambda: ids_present(browser, "confirm-button"))
    browser.find_element(By.ID, "confirm-button").click()
    wait_for("the result", lambda: ids_present(browser, "result-summary"))
    browser.get(other_url)
    history = browser.find_element(By.ID, "history").text
    assert "resolved alice operator receiver retired, see OPS-7" in history, history

    # The redriven event's history: parked, redriven, delivered.
    def story():
        browser.get(f"{url}/events?id={events['flaky-a']}")
        kinds = {row.get_attribute("class") for row in browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr")}
        return {"step-parked", "step-redriven", "step-delivered"} <= kinds
    wait_for("the event's whole story", story)
    shot(browser, "event-history.png")


def test_an_operator_archives_the_filtered_records_with_the_keyboard(stack, browser):
    url, h = stack["url"], stack["h"]
    login(browser, url, "operator")
    browser.get(f"{url}/dlq?endpoint=ep-broken&status=all")
    tab_to(browser, "archive-button")
    press_enter(browser)
    wait_for("the confirmation", lambda: ids_present(browser, "confirm-summary"))
    assert "archive 1 record " in browser.find_element(By.ID, "confirm-summary").text
    tab_to(browser, "confirm-button")
    press_enter(browser)
    wait_for("the result", lambda: ids_present(browser, "result-summary"))
    assert "Archived 1 record " in browser.find_element(By.ID, "result-summary").text
    objects = sorted(stack["archive"].glob(f"{h.dlq}/[0-9]*/[0-9]*/[0-9]*/*.avro"))
    assert len(objects) == 1, objects
    assert str(objects[0]) in browser.find_element(By.ID, "objects").text


def test_a_viewer_reads_without_action_buttons_or_payloads(stack, browser):
    url, events = stack["url"], stack["events"]
    login(browser, url, "viewer")
    assert not ids_present(browser, "actions", "redrive-button", "resolve-button", "note-button",
                           "archive-button")
    browser.find_element(By.LINK_TEXT, events["broken"]).find_element(
        By.XPATH, "ancestor::tr").find_element(By.CSS_SELECTOR, "td a").click()
    wait_for("the record page", lambda: "/dlq/records/" in browser.current_url)
    assert not ids_present(browser, "actions", "redrive-button", "resolve-button", "note-button")
    assert ids_present(browser, "payload-hidden")
    assert not ids_present(browser, "payload")


def test_an_admin_logs_in_and_the_page_fits_a_phone(stack, browser):
    url = stack["url"]
    login(browser, url, "admin")
    assert ids_present(browser, "actions"), "admins act as operators do"
    browser.set_window_size(390, 844)
    browser.get(f"{url}/dlq?status=all")
    width = browser.execute_script("return document.documentElement.scrollWidth")
    viewport = browser.execute_script("return window.innerWidth")
    assert width <= viewport + 1, f"the page scrolls sideways on a phone ({width} > {viewport})"
    for element_id in ["f-reason", "records", "redrive-button"]:
        element = browser.find_element(By.ID, element_id)
        assert element.is_displayed()
        assert element.rect["x"] >= 0
    button = browser.find_element(By.CSS_SELECTOR, "#filter button[type=submit]")
    assert button.rect["x"] + button.rect["width"] <= viewport + 1
    shot(browser, "dlq-narrow.png")
