import DaemonTool
import Glibc

XPBD.runAndExit()
