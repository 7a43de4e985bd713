"""A Qt 5 clipboard peer for the tests (Debian's python3-pyqt5): reads or sets CLIPBOARD.

qt_clipboard.py read               prints hasUrls, each URL, and the text Qt reads
qt_clipboard.py set-urls URL...    owns CLIPBOARD with those URLs (QMimeData.setUrls), prints
                                   "ready", serves until killed
qt_clipboard.py set-rich-and-exit TEXT HTML PNG MS
                                   owns CLIPBOARD with text/plain, text/html and image/png,
                                   prints "ready", MS milliseconds later prints "exiting" and
                                   exits normally (Qt hands the clipboard to the clipboard
                                   manager as its QApplication is destroyed)
qt_clipboard.py set-formats FORMAT=FILE...
                                   owns CLIPBOARD with each file's bytes under its MIME format,
                                   in that order (as Chromium offers an image after its private
                                   token), prints "ready", serves until killed
"""
import sys

from PyQt5.QtCore import QMimeData, QUrl
from PyQt5.QtWidgets import QApplication

app = QApplication(sys.argv[:1])
clipboard = app.clipboard()
mode = sys.argv[1]
if mode == "read":
    data = clipboard.mimeData()
    print("hasUrls", data.hasUrls())
    for url in data.urls():
        print("url", url.toString(QUrl.FullyEncoded))
    print("text", data.text())
elif mode == "set-urls":
    data = QMimeData()
    data.setUrls([QUrl(argument) for argument in sys.argv[2:]])
    clipboard.setMimeData(data)
    print("ready", flush=True)
    app.exec_()
elif mode == "set-rich-and-exit":
    from PyQt5.QtCore import QTimer

    data = QMimeData()
    data.setText(sys.argv[2])
    data.setHtml(sys.argv[3])
    with open(sys.argv[4], "rb") as image:
        data.setData("image/png", image.read())
    clipboard.setMimeData(data)
    print("ready", flush=True)
    QTimer.singleShot(int(sys.argv[5]), app.quit)
    app.exec_()
    print("exiting", flush=True)
    del app
elif mode == "set-formats":
    data = QMimeData()
    for argument in sys.argv[2:]:
        name, path = argument.rsplit("=", 1)
        with open(path, "rb") as source:
            data.setData(name, source.read())
    clipboard.setMimeData(data)
    print("ready", flush=True)
    app.exec_()
else:
    sys.exit("unknown mode " + mode)
