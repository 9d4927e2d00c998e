"""The web console in a real headless Chromium (Debian's, driven by Playwright), against a
running broker: create queues in the UI, send three messages with the CLI and watch the depth
reach 3 without reloading, browse them, redrive a dead letter, force-disconnect a client.

    python3 console.py --url http://127.0.0.1:6731 --server 127.0.0.1:6730 --ferry ferry \
        [--shots DIR]

Exits 0 when every step passed; otherwise prints the step that failed and exits 1. With
--shots, saves screenshots of the overview, queues and clients pages there."""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from playwright.sync_api import expect, sync_playwright

CHROMIUM = os.environ.get("FERRY_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Polling is every 2 s: anything the console shows comes within a few polls.
SHOWN = 15_000


def step(name):
    print(f"console: {name}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--shots")
    args = ap.parse_args()

    def cli(*words, check=True):
        return subprocess.run(
            [args.ferry, *words, "--server", args.server],
            check=check,
            capture_output=True,
            text=True,
            timeout=30,
        )

    def shot(page, name):
        if args.shots:
            page.wait_for_timeout(300)
            page.screenshot(path=os.path.join(args.shots, f"console-{name}.png"))

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1360, "height": 820},
        )
        page = browser.pages[0] if browser.pages else browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "console",
            lambda m: m.type == "error" and errors.append(f"{m.text} ({m.location.get('url')})"),
        )

        step("the console opens on the queues page")
        page.goto(f"{args.url}/#queues")
        expect(page.locator("#node")).to_contain_text("node ", timeout=SHOWN)
        # Set once: a reload would lose it.
        page.evaluate("window.__notReloaded = true")

        step("create queues in the UI (one as the other's dead-letter queue)")
        form = page.locator("#create-queue")
        form.locator("[name=name]").fill("orders.dead")
        form.locator("button").click()
        expect(page.locator('tr[data-queue="orders.dead"]')).to_be_visible(timeout=SHOWN)
        form.locator("[name=name]").fill("orders")
        form.locator("[name=max_deliveries]").fill("3")
        form.locator("[name=dead_letter_queue]").fill("orders.dead")
        form.locator("button").click()
        row = page.locator('tr[data-queue="orders"]')
        expect(row).to_be_visible(timeout=SHOWN)
        expect(row).to_contain_text("DLQ orders.dead")

        step("send three messages with the CLI; the depth reaches 3 without reloading")
        for i in range(1, 4):
            cli("send", "-q", "orders", "-p", f"n={i}", "--priority", str(4 + i), f"order {i}")
        expect(page.locator('td[data-depth="orders"]')).to_have_text("3", timeout=SHOWN)
        assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"

        step("browse the queue without consuming")
        row.click()
        messages = page.locator("#qd-messages tr[data-message]")
        expect(messages).to_have_count(3, timeout=SHOWN)
        expect(messages.first).to_contain_text("order 3")
        expect(messages.first).to_contain_text("n=3")
        expect(page.locator("#qd-figures")).to_contain_text("3 ready")
        page.locator("#qd-browse [name=selector]").fill("n = 2")
        page.locator("#qd-browse button[type=submit]").click()
        expect(messages).to_have_count(1, timeout=SHOWN)
        expect(messages.first).to_contain_text("order 2")
        page.locator("#qd-browse [name=selector]").fill("")
        page.locator("#qd-browse button[type=submit]").click()
        expect(messages).to_have_count(3, timeout=SHOWN)
        expect(page.locator('td[data-depth="orders"]')).to_have_text("3")

        step("set an expiry queue in the settings form; a message expires into it")
        settings = page.locator("#qd-settings")
        settings.locator("[name=expiry_queue]").fill("orders.dead")
        settings.locator("button").click()
        expect(row).to_contain_text("expiry orders.dead", timeout=SHOWN)
        cli("send", "-q", "orders", "--ttl", "1ms", "late order")
        expect(page.locator('td[data-depth="orders.dead"]')).to_have_text("1", timeout=SHOWN)
        shot(page, "queues")

        step("redrive the dead letter to its queue")
        page.locator('tr[data-queue="orders.dead"]').click()
        dead = page.locator("#qd-messages tr[data-message]")
        expect(dead).to_have_count(1, timeout=SHOWN)
        expect(dead.first).to_contain_text("ferry_original_queue=orders")
        dead.first.locator("button[data-redrive]").click()
        expect(page.locator("#toast")).to_contain_text("redriven", timeout=SHOWN)
        expect(page.locator('td[data-depth="orders.dead"]')).to_have_text("0", timeout=SHOWN)
        expect(page.locator('td[data-depth="orders"]')).to_have_text("4", timeout=SHOWN)

        step("force-disconnect a client")
        # An interactive shell holds its session open while its input stays open.
        shells = [
            subprocess.Popen(
                [args.ferry, "shell", "--name", name, "--server", args.server],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name in ["billing", "worker"]
        ]
        try:
            page.goto(f"{args.url}/#clients")
            worker = page.locator('tr[data-client="worker"]')
            expect(worker).to_contain_text("online", timeout=SHOWN)
            expect(page.locator("button[data-disconnect]")).to_have_count(2, timeout=SHOWN)
            expect(page.locator("#client-cards")).to_contain_text("Online")
            shot(page, "clients")
            worker.locator("button[data-disconnect]").click()
            expect(page.locator("#toast")).to_contain_text("disconnected worker", timeout=SHOWN)
            expect(worker).to_contain_text("offline", timeout=SHOWN)
            expect(worker.locator("button[data-disconnect]")).to_have_count(0)
        finally:
            for shell in shells:
                shell.kill()
                shell.wait()

        step("the overview shows the traffic")
        for i in range(20):
            cli("send", "-q", "orders", f"more {i}")
            if i % 5 == 0:
                cli("recv", "-q", "orders", "--count", "3")
            time.sleep(0.15)
        page.goto(f"{args.url}/#overview")
        expect(page.locator("#cards")).to_contain_text("Messages ready", timeout=SHOWN)
        expect(page.locator("#chart-rates svg polyline").first).to_be_visible(timeout=SHOWN)
        page.wait_for_timeout(4500)
        shot(page, "overview")

        assert not errors, f"the page logged errors: {errors}"
        browser.close()
    print("console: every step passed")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report the step that failed, then fail
        print(f"console: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
