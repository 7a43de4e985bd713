"""A Qt 5 clipboard peer for the tests (Debian's python3-pyqt5): reads or sets CLIPBOARD.

qt_clipboard.py window TITLE       a window on screen that copies nothing, prints "ready", runs until
                                   killed (on X or on Wayland, as QT_QPA_PLATFORM says)
qt_clipboard.py read               prints hasUrls, each URL, and the text Qt reads
qt_clipboard.py image-diff FILE    reads QClipboard.image() and prints "size W H" and "maxdiff N": the
                                   largest difference of an RGBA channel against FILE as Qt decodes it
qt_clipboard.py set-image-and-exit PNG FLAG
                                   owns CLIPBOARD with the image (QClipboard.setImage: Qt offers it in
                                   every format it writes, PNG first), prints "ready", and once the
                                   file FLAG exists exits normally (the clipboard manager takes it over)
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
from PyQt5.QtWidgets import QApplication, QWidget

app = QApplication(sys.argv[:1])
clipboard = app.clipboard()
mode = sys.argv[1]
if mode == "window":
    window = QWidget()
    window.setWindowTitle(sys.argv[2])
    window.show()
    print("ready", flush=True)
    app.exec_()
elif mode == "read":
    data = clipboard.mimeData()
    print("hasUrls", data.hasUrls())
    for url in data.urls():
        print("url", url.toString(QUrl.FullyEncoded))
    print("text", data.text())
elif mode == "image-diff":
    from PyQt5.QtGui import QImage

    image = clipboard.image()
    if image.isNull():
        sys.exit("no image")
    expected = QImage(sys.argv[2])
    print("size", image.width(), image.height())
    if image.size() != expected.size():
        print("maxdiff -1")
    else:
        a = image.convertToFormat(QImage.Format_RGBA8888)
        b = expected.convertToFormat(QImage.Format_RGBA8888)
        width, height = a.width(), a.height()
        rows_a = [bytes(a.constScanLine(y).asarray(width * 4)) for y in range(height)]
        rows_b = [bytes(b.constScanLine(y).asarray(width * 4)) for y in range(height)]
        print("maxdiff", max((abs(x - y) for ra, rb in zip(rows_a, rows_b) for x, y in zip(ra, rb)), default=0))
elif mode == "set-image-and-exit":
    from PyQt5.QtCore import QTimer
    from PyQt5.QtGui import QImage

    import os

    clipboard.setImage(QImage(sys.argv[2]))
    print("ready", flush=True)
    timer = QTimer()
    timer.timeout.connect(lambda: os.path.exists(sys.argv[3]) and app.quit())
    timer.start(20)
    app.exec_()
    print("exiting", flush=True)
    del app
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
