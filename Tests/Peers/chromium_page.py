"""A web page for Chromium as a clipboard peer in the tests, and the loopback server that serves it.

chromium_page.py TEXT HTML   serves the page on 127.0.0.1 (a free port), prints "url URL", then one
                             line per event the page reports, as JSON:
                             {"event": "paste", "text": ..., "html": ..., "types": [...], "files": N}
                             when Chromium pastes (ctrl+v) into the page;
                             {"event": "copy"} when Chromium copies (ctrl+c): the page sets TEXT as
                             text/plain and HTML as text/html;
                             {"event": "ready"} once the page has loaded and its text box has the focus.

The page reports to the server with fetch; nothing leaves the loopback interface.
"""
import http.server
import json
import sys

TEXT, HTML = sys.argv[1], sys.argv[2]

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>xpb clipboard peer</title></head>
<body>
<textarea id="box" autofocus rows="4" cols="40"></textarea>
<script>
const text = %s, html = %s;
function report(event) {
  fetch("/report", {method: "POST", body: JSON.stringify(event)});
}
document.addEventListener("paste", e => {
  const data = e.clipboardData;
  report({event: "paste", text: data.getData("text/plain"), html: data.getData("text/html"),
          types: Array.from(data.types), files: data.files.length});
  e.preventDefault();
});
document.addEventListener("copy", e => {
  e.clipboardData.setData("text/plain", text);
  e.clipboardData.setData("text/html", html);
  e.preventDefault();
  report({event: "copy"});
});
window.addEventListener("load", () => {
  const box = document.getElementById("box");
  box.value = "select me";
  box.focus();
  box.select();
  report({event: "ready"});
});
</script>
</body></html>
""" % (json.dumps(TEXT), json.dumps(HTML))


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        event = json.loads(self.rfile.read(length) or b"{}")
        print(json.dumps(event), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("url http://127.0.0.1:%d/" % server.server_address[1], flush=True)
server.serve_forever()
