"""Another origin for a browser: serves a web client's page, writes what the page reports as JSON lines to a file, and
relays the page's calls to the gateway through connections the test can cut, as a network drop would.

    browser_origin.py PAGE_PORT RELAY_PORT GATEWAY_PORT REPORTS_FILE

The page (GET /?token=...&room=...) is served on http://localhost:PAGE_PORT; the API it calls is
http://127.0.0.1:RELAY_PORT, another origin, so every call is a cross-origin one. POST /drop closes every relayed
connection. Only the standard library.
"""
import asyncio
import json
import sys

PAGE = """<!doctype html>
<meta charset="utf-8">
<title>chat stream</title>
<script>
// What a web client does: a ticket with its bearer token, then an EventSource with the ticket. The browser reconnects
// a dropped stream by itself with the same URL; a used ticket is refused, which closes the EventSource: then a new
// ticket, and the stream reopened after the last event seen.
const params = new URLSearchParams(location.search);
const api = params.get("api"), token = params.get("token"), room = params.get("room");
let lastEventId = null, opens = 0;
const report = (kind, fields = {}) =>
  fetch("/report", {method: "POST", body: JSON.stringify({kind, ...fields})});

async function open() {
  const r = await fetch(`${api}/v1/auth/stream-tickets`, {method: "POST", headers: {Authorization: `Bearer ${token}`}});
  if (r.status !== 201) { report("ticket_refused", {status: r.status}); return; }
  const {ticket} = await r.json();
  let url = `${api}/v1/rooms/${room}/events?ticket=${encodeURIComponent(ticket)}`;
  if (lastEventId) url += `&lastEventId=${encodeURIComponent(lastEventId)}`;
  const stream = new EventSource(url);
  stream.onopen = () => report("open", {opens: ++opens, resumedAfter: lastEventId});
  stream.addEventListener("message_created", (e) => {
    lastEventId = e.lastEventId;
    report("message", {id: e.lastEventId, text: JSON.parse(e.data).text});
  });
  stream.onerror = () => {
    if (stream.readyState === EventSource.CLOSED) {
      report("closed");
      setTimeout(open, 100);
    } else {
      report("reconnecting");
    }
  };
}
open().catch((e) => report("failed", {error: String(e)}));
</script>
"""


async def main():
    page_port, relay_port, gateway_port = (int(a) for a in sys.argv[1:4])
    reports = open(sys.argv[4], "a", buffering=1)
    relayed = set()

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def relay(client_reader, client_writer):
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", gateway_port)
        pair = (client_writer, upstream_writer)
        relayed.add(pair)
        await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer))
        relayed.discard(pair)

    async def page(reader, writer):
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        method, target = head.split(" ")[:2]
        length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")
                       if line.lower().startswith("content-length:")), 0)
        body = await reader.readexactly(length)
        status, content_type, answer = "204 No Content", "text/plain", b""
        if method == "GET" and target.startswith("/?"):
            status, content_type, answer = "200 OK", "text/html; charset=utf-8", PAGE.encode()
        elif method == "POST" and target == "/report":
            reports.write(json.dumps(json.loads(body)) + "\n")
        elif method == "POST" and target == "/drop":
            for pair in list(relayed):
                for w in pair:
                    w.transport.abort()
        else:
            status = "404 Not Found"
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(answer)}\r\n"
                     "Connection: close\r\n\r\n".encode() + answer)
        await writer.drain()
        writer.close()

    await asyncio.start_server(page, "localhost", page_port)
    await asyncio.start_server(relay, "127.0.0.1", relay_port)
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
