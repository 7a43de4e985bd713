#ifndef XPB_CDBUS_GLUE_H
#define XPB_CDBUS_GLUE_H
// Nothing to call: this target only provides, for the static link, what libdbus-1.a asks of
// libsystemd (which Debian ships as a shared library only). See CDBusGlue.c.
int cdbusglue_linked(void);
#endif
