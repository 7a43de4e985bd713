#ifndef XPB_CPROCESS_ARGUMENTS_H
#define XPB_CPROCESS_ARGUMENTS_H
// Nothing to call: this target only gives the static link the Swift runtime's two command line
// entry points, taken from the arguments the C library hands the program at start. See
// CProcessArguments.c.
int cprocessarguments_linked(void);
#endif
