import DaemonTool
import Glibc

exit(XPBD.main())
