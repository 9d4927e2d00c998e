"""A web page in a real headless Chromium (Playwright over Debian's chromium) subscribes to a
topic over STOMP over WebSocket with @stomp/stompjs, and shows a message published with the
CLI. Run by crates/stomp/tests/interop.rs.

Usage: stomp_page.py --http HOST:PORT --server HOST:PORT --ferry PATH"""

import argparse
import os
import subprocess
import tempfile

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("FERRY_CHROMIUM", "/usr/bin/chromium")
BUNDLE = os.path.join(os.path.dirname(__file__), "stompjs", "node_modules", "@stomp",
                      "stompjs", "bundles", "stomp.umd.min.js")

PAGE = """<!doctype html>
<html><body>
<p id="state">connecting</p>
<ul id="messages"></ul>
</body></html>"""

SCRIPT = """
const client = new StompJs.Client({ brokerURL: "ws://%s/stomp", reconnectDelay: 0 });
client.onConnect = () => {
  client.subscribe("/topic/page.news", (m) => {
    const li = document.createElement("li");
    li.textContent = m.body + " (" + m.headers.origin + ")";
    document.getElementById("messages").appendChild(li);
  }, { receipt: "subscribed" });
  client.watchForReceipt("subscribed", () => {
    document.getElementById("state").textContent = "subscribed";
  });
};
client.onStompError = (f) => { document.getElementById("state").textContent = "error: " + f.headers.message; };
client.activate();
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--ferry", required=True)
    args = ap.parse_args()
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        browser = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        # A page of the broker's own origin (pages from elsewhere may not connect).
        page.goto(f"http://{args.http}/healthz")
        page.set_content(PAGE)
        page.add_script_tag(path=BUNDLE)
        page.add_script_tag(content=SCRIPT % args.http)
        page.wait_for_function("document.getElementById('state').textContent === 'subscribed'",
                               timeout=15000)
        print("ok: the page subscribed over WebSocket", flush=True)
        subprocess.run([args.ferry, "publish", "--topic", "page.news", "--server", args.server,
                        "-p", "origin=cli", "published with the CLI"], check=True, timeout=30,
                       stdout=subprocess.DEVNULL)
        page.wait_for_selector("#messages li", timeout=15000)
        text = page.inner_text("#messages li")
        assert text == "published with the CLI (cli)", text
        print("ok: the page shows the message published with the CLI", flush=True)
        browser.close()
    print("every check passed")


if __name__ == "__main__":
    main()
