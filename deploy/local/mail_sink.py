"""A real SMTP server that keeps what it receives: aiosmtpd (PyPI), every message accepted stored in a Maildir a
person or a test can read. For the tests: STARTTLS required and AUTH (PLAIN, LOGIN) for one account, over TLS only.
It prints "ready" once listening, and stops when its standard input closes.

    python mail_sink.py PORT MAILDIR CERT KEY USER PASSWORD
    python mail_sink.py --local PORT MAILDIR   (the local stack's: plain SMTP on 127.0.0.1, until SIGTERM)
    python mail_sink.py --read MESSAGE_FILE   (prints what a mail client sees of it, as JSON)
"""
import email
import email.policy
import json
import ssl
import sys


def read(path):
    with open(path, "rb") as f:
        message = email.message_from_binary_file(f, policy=email.policy.default)
    text = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    print(json.dumps({
        "subject": str(message["subject"]), "from": str(message["from"]), "to": str(message["to"]),
        "messageId": str(message["message-id"]), "date": str(message["date"]),
        "listUnsubscribe": message["list-unsubscribe"] and str(message["list-unsubscribe"]),
        "listUnsubscribePost": message["list-unsubscribe-post"] and str(message["list-unsubscribe-post"]),
        "contentType": message.get_content_type(),
        "text": text.get_content() if text else None, "html": html.get_content() if html else None,
        "mailFrom": str(message["x-mailfrom"]), "rcptTo": str(message["x-rcptto"]),
    }))


def serve(port, maildir, cert, key, user, password):
    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Mailbox
    from aiosmtpd.smtp import AuthResult, LoginPassword

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and auth_data.login.decode() == user and auth_data.password.decode() == password
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535 itself

    controller = Controller(Mailbox(maildir), hostname="127.0.0.1", port=int(port), tls_context=context, require_starttls=True,
                            authenticator=authenticator, auth_required=True, auth_require_tls=True)
    controller.start()
    print("ready", flush=True)
    sys.stdin.read()
    controller.stop()


def serve_local(port, maildir):
    import signal
    import threading
    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Mailbox

    controller = Controller(Mailbox(maildir), hostname="127.0.0.1", port=int(port))
    controller.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    if sys.argv[1] == "--read":
        read(sys.argv[2])
    elif sys.argv[1] == "--local":
        serve_local(sys.argv[2], sys.argv[3])
    else:
        serve(*sys.argv[1:7])
