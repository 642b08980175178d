"""A small W3C WebDriver client over chromedriver's HTTP endpoint (Debian's chromium-driver), standard library (and testlib) only:
enough to open pages, click, type, run scripts, read the console and take screenshots in headless Chromium."""
import base64
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

from testlib import free_port

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class WebDriverError(Exception):
    pass


class Browser:
    """Headless Chromium driven through chromedriver; `close()` ends both."""

    def __init__(self, log_path, width=1280, height=900, downloads=None):
        driver = shutil.which("chromedriver") or "/usr/lib/chromium/chromedriver"
        binary = shutil.which("chromium") or "/usr/bin/chromium"
        self.port = free_port()
        self.driver = subprocess.Popen([driver, f"--port={self.port}"], stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 20
        while True:
            try:
                self._call("GET", "/status")
                break
            except (OSError, WebDriverError):
                if time.time() > deadline:
                    raise WebDriverError("chromedriver did not start")
                time.sleep(0.2)
        # chromedriver would have Chromium's DevTools listen on a port the kernel picks (0: the ephemeral range);
        # named here, it connects to this one. chromedriver already holds its own, so the two never meet.
        devtools = free_port()
        args = ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                f"--remote-debugging-port={devtools}"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium's sandbox refuses to run as root
        options = {"binary": binary, "args": args}
        if downloads:
            # Files a page offers for download land here without a prompt.
            options["prefs"] = {"download.default_directory": str(downloads), "download.prompt_for_download": False,
                                "download.directory_upgrade": True}
        capabilities = {"browserName": "chrome", "goog:chromeOptions": options,
                        "goog:loggingPrefs": {"browser": "ALL"}, "pageLoadStrategy": "normal"}
        session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})
        self.session = f"/session/{session['sessionId']}"
        self._call("POST", f"{self.session}/timeouts", {"script": 90000, "pageLoad": 30000, "implicit": 0})

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as error:
            detail = json.loads(error.read() or b"{}").get("value", {})
            raise WebDriverError(f"{method} {path}: {detail.get('error')}: {detail.get('message', '')[:500]}")

    def get(self, url):
        self._call("POST", f"{self.session}/url", {"url": url})

    def find(self, css):
        return self._call("POST", f"{self.session}/element", {"using": "css selector", "value": css})[ELEMENT]

    def click(self, css):
        self._call("POST", f"{self.session}/element/{self.find(css)}/click", {})

    def type(self, css, text, clear=True):
        element = self.find(css)
        if clear:
            self._call("POST", f"{self.session}/element/{element}/clear", {})
        self._call("POST", f"{self.session}/element/{element}/value", {"text": text})

    def select(self, css, value):
        self.run("const e = document.querySelector(arguments[0]); e.value = arguments[1];"
                 "e.dispatchEvent(new Event('change', {bubbles: true}));", css, value)

    def text(self, css):
        return self.run("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)

    def run(self, script, *args):
        return self._call("POST", f"{self.session}/execute/sync", {"script": script, "args": list(args)})

    def run_async(self, body, *args):
        """Runs `body` as an async function (arguments in `args`); its result, or the error it threw, comes back."""
        script = ("const done = arguments[arguments.length - 1];"
                  f"(async (args) => {{ {body} }})(Array.from(arguments).slice(0, -1))"
                  ".then((value) => done({value}), (error) => done({error: String(error && error.stack || error),"
                  " code: error && error.code, status: error && error.status}));")
        result = self._call("POST", f"{self.session}/execute/async", {"script": script, "args": list(args)})
        if "error" in result:
            raise WebDriverError(f"page script failed: {result}")
        return result.get("value")

    def viewport(self, width=None, height=None, mobile=False):
        """Emulates a viewport of this size (a phone's, with `mobile`); without a width, back to the window's."""
        if width is None:
            self._call("POST", f"{self.session}/goog/cdp/execute", {"cmd": "Emulation.clearDeviceMetricsOverride", "params": {}})
        else:
            self._call("POST", f"{self.session}/goog/cdp/execute",
                       {"cmd": "Emulation.setDeviceMetricsOverride",
                        "params": {"width": width, "height": height or 844, "deviceScaleFactor": 1, "mobile": mobile}})

    def wait_for(self, script, *args, seconds=30):
        """Waits until `script` (a boolean expression's body, `return ...`) is true in the page."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.run(script, *args):
                return True
            time.sleep(0.1)
        return False

    def console(self):
        """Console entries since the last call: [{level, source, message}]."""
        return self._call("POST", f"{self.session}/se/log", {"type": "browser"})

    def screenshot(self, path):
        with open(path, "wb") as file:
            file.write(base64.b64decode(self._call("GET", f"{self.session}/screenshot")))

    def close(self):
        try:
            self._call("DELETE", self.session)
        except Exception:
            pass
        self.driver.terminate()
        try:
            self.driver.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.driver.kill()
