# A session app for the router's tests: it answers its health path, shows
# the headers and path it was sent (so a test sees what the router
# forwards), streams server-sent events with a pause between them, serves a
# body of a given size, and echoes WebSocket messages (RFC 6455, text
# frames, written here so the test needs nothing but python3).
import base64, hashlib, json, os, socket, struct, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(sock, n):
    b = b""
    while len(b) < n:
        chunk = sock.recv(n - len(b))
        if not chunk:
            raise EOFError
        b += chunk
    return b


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket()
        if self.path.startswith("/sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(3):
                self.wfile.write(b"data: event %d\n\n" % i)
                self.wfile.flush()
                time.sleep(0.4)
            self.close_connection = True
            return
        if self.path.startswith("/bytes/"):
            n = int(self.path[len("/bytes/"):])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                k = min(n, len(chunk))
                self.wfile.write(chunk[:k])
                n -= k
            return
        body = json.dumps({"path": self.path, "port": PORT,
                           "headers": {k: v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        try:
            while True:
                b1, b2 = read_exact(sock, 2)
                op, n = b1 & 0x0F, b2 & 0x7F
                if n == 126:
                    n = struct.unpack(">H", read_exact(sock, 2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", read_exact(sock, 8))[0]
                mask = read_exact(sock, 4) if b2 & 0x80 else b"\0\0\0\0"
                data = bytes(c ^ mask[i % 4] for i, c in enumerate(read_exact(sock, n)))
                if op == 8:
                    sock.sendall(b"\x88\x00")
                    return
                if op != 1:
                    continue
                out = b"echo: " + data
                head = bytes([0x81])
                if len(out) < 126:
                    head += bytes([len(out)])
                else:
                    head += bytes([126]) + struct.pack(">H", len(out))
                sock.sendall(head + out)
        except (EOFError, OSError):
            return
        finally:
            self.close_connection = True


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
