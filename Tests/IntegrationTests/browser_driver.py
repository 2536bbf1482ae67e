"""Drives a headless Chromium (Debian's) through the DevTools protocol, for tests of pages that must be watched while
they live (the operations console): one JSON command a line on stdin, one JSON answer a line on stdout.

    browser_driver.py [SCREEN_WIDTH SCREEN_HEIGHT]
    {"open": URL}                                   -> {"ok": true}
    {"until": JS_EXPRESSION, "timeout": SECONDS}    -> {"ok": true, "value": V} once the expression is truthy, else
                                                       {"ok": false, "value": its last value}
    {"eval": JS_EXPRESSION}                         -> {"ok": true, "value": V}
    {"screenshot": PATH}                            -> {"ok": true} (a PNG of the page as it is)

Only the standard library: the WebSocket is the few frames the protocol needs (RFC 6455, text frames, masked)."""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class WebSocket:
    def __init__(self, url):
        rest = url.split("://", 1)[1]
        hostport, path = rest.split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(head.decode(errors="replace"))

    def send(self, text):
        data = text.encode()
        header = bytes([0x81])
        if len(data) < 126:
            header += bytes([0x80 | len(data)])
        elif len(data) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(data))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(data))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            out += chunk
        return out

    def receive(self):
        message = b""
        while True:
            first, second = self._exact(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._exact(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._exact(8))[0]
            payload = self._exact(length)
            if first & 0x0F == 0x8:
                raise ConnectionError("DevTools closed the connection")
            if first & 0x0F in (0x9, 0xA):
                continue
            message += payload
            if first & 0x80:
                return message.decode()


class Browser:
    def __init__(self, width, height):
        self.profile = tempfile.mkdtemp(prefix="browser-driver-")
        # No sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
        self.process = subprocess.Popen(
            ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             f"--window-size={width},{height}", "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            if time.time() > deadline or self.process.poll() is not None:
                raise RuntimeError("Chromium did not open its DevTools port")
            time.sleep(0.1)
        port = open(port_file).read().split("\n")[0]
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(p for p in pages if p["type"] == "page")
        self.ws = WebSocket(page["webSocketDebuggerUrl"])
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            answer = json.loads(self.ws.receive())
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            return None
        return result.get("result", {}).get("value")

    def close(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    width, height = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else (1000, 1100)
    browser = Browser(width, height)
    try:
        for line in sys.stdin:
            command = json.loads(line)
            if "open" in command:
                browser.call("Page.navigate", url=command["open"])
                answer = {"ok": True}
            elif "until" in command:
                deadline, value = time.time() + command.get("timeout", 10), None
                while time.time() < deadline:
                    value = browser.evaluate(command["until"])
                    if value:
                        break
                    time.sleep(0.1)
                answer = {"ok": bool(value), "value": value}
            elif "eval" in command:
                answer = {"ok": True, "value": browser.evaluate(command["eval"])}
            elif "screenshot" in command:
                shot = browser.call("Page.captureScreenshot", format="png")
                with open(command["screenshot"], "wb") as f:
                    f.write(base64.b64decode(shot["data"]))
                answer = {"ok": True}
            else:
                answer = {"ok": False, "value": f"unknown command {command}"}
            print(json.dumps(answer), flush=True)
    finally:
        browser.close()


main()
