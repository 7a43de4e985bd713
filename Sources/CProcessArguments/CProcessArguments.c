// Swift's `CommandLine.arguments` comes from `_swift_stdlib_getUnsafeArgvArgc`. On Linux the
// runtime's own (stdlib/public/stubs/CommandLine.cpp) finds the argument vector from a static
// constructor that runs at every start: it reads /proc/self/maps line by line with sscanf to
// find the stack, then searches it for argv. That is about 53,000 instructions and five system
// calls before main, 5 % of a 13-byte paste (callgrind).
//
// The C library already hands argc and argv to every function in .init_array (glibc does so in
// static executables as in dynamic ones), so they are kept from there. Defined here, in an
// object linked before libswiftCore.a, the two entry points leave the runtime's CommandLine.cpp.o
// unfetched from the archive, its constructor with it. Weak: should a runtime ever need that
// object for something else, its strong definitions win and the program behaves as before.
#include <stddef.h>
#include "CProcessArguments.h"

static char **startArguments;
static int startCount;
static char **overrideArguments;
static int overrideCount;

static void keepArguments(int argc, char **argv, char **envp) {
    (void)envp;
    startCount = argc;
    startArguments = argv;
}

__attribute__((section(".init_array"), used)) static void (*const keepArgumentsAtStart)(int, char **, char **) = keepArguments;

__attribute__((weak)) char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    static char *none[] = { NULL };
    if (overrideArguments) {
        *outArgLen = overrideCount;
        return overrideArguments;
    }
    if (!startArguments) {
        *outArgLen = 0;
        return none;
    }
    *outArgLen = startCount;
    return startArguments;
}

__attribute__((weak)) void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    overrideArguments = argv;
    overrideCount = argc;
}

int cprocessarguments_linked(void) { return 1; }
