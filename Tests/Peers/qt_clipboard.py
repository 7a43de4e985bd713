"""A Qt 5 clipboard peer for the tests (Debian's python3-pyqt5): reads or sets CLIPBOARD.

qt_clipboard.py read               prints hasUrls, each URL, and the text Qt reads
qt_clipboard.py set-urls URL...    owns CLIPBOARD with those URLs (QMimeData.setUrls), prints
                                   "ready", serves until killed
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
else:
    sys.exit("unknown mode " + mode)
