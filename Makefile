# Builds xpb as a fully static executable (the fast start: no dynamic loader, no relocations; a
# 13-byte paste at xclip's speed), xpbd being a link to it, and installs them with their man
# pages, shell completions, systemd user unit and autostart entry.
#
#   make                                  install the build's missing packages (Debian, Ubuntu), then build
#                                         (into .build-static/release)
#   make deps                             install the build's missing packages alone
#   make test                             install the build's and the tests' missing packages, build, swift test
#   make deb                              the Debian packages xpb and xpb-standins (into DEBDIR, .build-deb)
#   make install PREFIX=~/.local          install (PREFIX defaults to /usr/local; DESTDIR honoured)
#   make install PREFIX=~/.local LINKS=1  also install xclip and xsel links to xpb (stand-ins)
#   make enable PREFIX=~/.local           start xpbd with every session (systemd user unit, else autostart)
#   make uninstall PREFIX=~/.local        remove everything install and enable put in place
#
# The library products are untouched by these flags: a package that depends on xpb builds them
# as usual.

PREFIX ?= /usr/local
DESTDIR ?=
LINKS ?= 0
SWIFT ?= swift
SCRATCH ?= .build-static
# -disable-concrete-type-metadata-mangled-name-accessors: our code gets each generic type's
# metadata from its accessor, given the conformances it needs, instead of decoding a mangled
# name at run time. Decoding one has the runtime look each conformance up (X11Atom: Hashable,
# String: Hashable …) by scanning every conformance record of the binary, FoundationEssentials'
# included: about 250,000 instructions a first look-up, 70 % of a 13-byte paste (4.1 M
# instructions before, 1.3 M after; callgrind). The binary grows by less than 0.1 %.
# -function-sections (and its C twins): each function in a section of its own, so that the link's
# --gc-sections drops what nothing calls in our modules as it does in Swift's own libraries,
# which are built that way (20.93 → 20.69 MiB stripped).
# lld with --symbol-ordering-file: the functions and globals a one-shot paste or copy touches are
# laid out together (Scripts/link-order.txt, written by Scripts/gen-link-order), so that a fresh
# start faults in ~170 pages of the binary instead of ~250 (a 13-byte paste, both binaries read
# back from disk: 2.2 → 1.8 ms, measured by hand; docs/building.md). Symbols the list names that the
# code no longer has are skipped: the order is a layout, never a condition of the build.
# --icf=safe: lld folds identical functions whose address nothing takes (the objects' address-
# significance tables say which; sections of objects without one are never folded): 12 KB less
# of xpb stripped (23,071,704 → 23,059,416 B), under its 22 MiB limit again once
# xpbd --kdeconnect came.
# -internalize-at-link: the public and package functions of our modules went into the objects
# marked as used (SHF_GNU_RETAIN), so --gc-sections kept them all, called or not (the fuzzer's
# entry points, 19.5 KB, were in xpb). The static binaries are the whole link unit: nothing outside
# calls in, and with this the linker drops what nothing calls. xpb stripped 23,071,704 →
# 22,768,600 B. Only this build has it: a package depending on the library (Tests/ClientPackage)
# builds without it, as it must.
STATIC_FLAGS = -c release --scratch-path $(SCRATCH) \
	-Xswiftc -static-executable -Xswiftc -Xfrontend -Xswiftc -internalize-at-link \
	-Xswiftc -use-ld=lld -Xlinker --symbol-ordering-file=$(CURDIR)/Scripts/link-order.txt -Xlinker --no-warn-symbol-ordering -Xlinker --icf=safe \
	-Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors \
	-Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections -Xcc -fdata-sections \
	-Xlinker -lxcb -Xlinker -lXau -Xlinker -lXdmcp \
	$(foreach lib,$(IMAGE_LIBS),-Xlinker -l$(lib))
# What the image codecs' static archives need beyond the libraries the package names, each after
# the archive that needs it (the link reads archives in order): libtiff's remaining compression
# codecs (webp again, deflate, jpeg; LERC, Zstandard, LZMA and JBIG are left out by
# Sources/CImageCodecs), and libXpm's libX11 and libX11's xcb.
IMAGE_LIBS = tiff webp deflate jpeg netpbm Xpm X11 xcb Xau Xdmcp

BIN = $(SCRATCH)/release
bindir = $(DESTDIR)$(PREFIX)/bin
mandir = $(DESTDIR)$(PREFIX)/share/man/man1
bashdir = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
zshdir = $(DESTDIR)$(PREFIX)/share/zsh/site-functions
fishdir = $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
unitdir = $(DESTDIR)$(PREFIX)/share/systemd/user
sharedir = $(DESTDIR)$(PREFIX)/share/xpb
AUTOSTART ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/autostart

.PHONY: all deps test deb build docs install uninstall enable clean

all: deps build

# What to install comes from one list, Scripts/packages.txt, which .ci/run reads too.
deps:
	@Scripts/deps build

# The README's test command. The static build comes first: the install tests use it, and building
# it while timing-sensitive tests run would load both cores for minutes.
test:
	@Scripts/deps build test
	@$(MAKE) --no-print-directory build
	@Scripts/run-tests $(SWIFT)

# The generated parts of docs/xpb.md and docs/xpbd.md, from the option tables (a test checks them).
docs: build
	@Scripts/gen-docs $(BIN)/xpb $(BIN)/xpbd

# The Debian packages: xpb (the binary, xpbd as its link, pages, completions, the user unit and the
# autostart entry) and xpb-standins (xclip and xsel as links to xpb; it conflicts with the real
# ones). Scripts/make-deb lays them out with this Makefile's install and builds them with dpkg-deb.
DEBDIR ?= .build-deb
deb: build
	@Scripts/make-deb $(BIN) $(DEBDIR)

# The static link draws warnings from glibc that say nothing to a user ("Using 'getaddrinfo'
# in statically linked applications requires at runtime the shared libraries ..."): Swift's
# runtime, FoundationEssentials, libX11 and libxcb reference glibc's NSS, dlopen and mktemp.
# What is reached at run time: getaddrinfo only for a display on another host by name (xcb's TCP
# connection; a numeric address needs no NSS module, and localhost:N is opened as 127.0.0.1:N);
# the user database only when $$HOME is unset; dlopen and mktemp never. docs/building.md says the
# same. They are left out of the output, with one note; every other line, warnings included, is
# shown.
QUIET_GLIBC = sed -e "/in statically linked applications requires at runtime the shared libraries/d" \
	-e "/the use of .mktemp. is dangerous/d"

# One binary: xpb is also xpbd when run under that name, so xpbd is a link to it (the daemon's
# code adds 2 MiB to xpb; two binaries would carry Swift's runtime and FoundationEssentials twice).
# xpbd-kdeconnect, which xpbd --kdeconnect runs, is a second: TLS with X.509 would add about 4 MB
# of OpenSSL to xpb, which every copy and paste starts.
#
# It first checks that the build's packages are there (a third of a second): a `swift build` run
# without them keeps what pkg-config said in its plan, and goes on failing on a missing header
# after the packages are installed, until its scratch directory is removed. On a system with no
# package list (status 3: not Debian, Ubuntu, Fedora or Arch) it says so and builds.
build:
	@Scripts/deps --check build || [ $$? -eq 3 ]
	@echo "$(SWIFT) build $(STATIC_FLAGS) --product xpb"
	@{ $(SWIFT) build $(STATIC_FLAGS) --product xpb 2>&1; echo $$? > $(SCRATCH).status; } | $(QUIET_GLIBC); \
		status=$$(cat $(SCRATCH).status); rm -f $(SCRATCH).status; [ "$$status" = 0 ] || exit $$status
	ln -sf xpb $(BIN)/xpbd
	@echo "$(SWIFT) build $(STATIC_FLAGS) --product xpbd-kdeconnect"
	@{ $(SWIFT) build $(STATIC_FLAGS) --product xpbd-kdeconnect 2>&1; echo $$? > $(SCRATCH).status; } | $(QUIET_GLIBC); \
		status=$$(cat $(SCRATCH).status); rm -f $(SCRATCH).status; [ "$$status" = 0 ] || exit $$status
	@echo "note: glibc's warnings about static linking were left out (see docs/building.md)"

# The directories install creates (those missing, up to the first that exists) are listed in
# $(sharedir)/created-dirs, so that uninstall removes them again once they are empty, and
# only them.
dirs = $(bindir) $(mandir) $(bashdir) $(zshdir) $(fishdir) $(unitdir) $(sharedir)

install: build
	@created=""; for dir in $(dirs); do \
		while [ ! -d "$$dir" ] && [ "$$dir" != / ] && [ "$$dir" != . ]; do created="$$created$$dir\n"; dir=$$(dirname "$$dir"); done; \
	done; \
	install -d $(dirs); \
	{ printf '%b' "$$created"; cat $(sharedir)/created-dirs 2>/dev/null; } | sort -u > $(sharedir)/created-dirs.new; \
	mv $(sharedir)/created-dirs.new $(sharedir)/created-dirs
	# Stripped: the symbol tables are a tenth of each binary and nothing reads them at run time.
	install -s -m 755 $(BIN)/xpb $(bindir)/xpb
	ln -sf xpb $(bindir)/xpbd
	install -s -m 755 $(BIN)/xpbd-kdeconnect $(bindir)/xpbd-kdeconnect
	$(BIN)/xpb manual > $(mandir)/xpb.1
	$(BIN)/xpbd --manual > $(mandir)/xpbd.1
	install -m 644 Contrib/xpbd-kdeconnect.1 $(mandir)/xpbd-kdeconnect.1
	$(BIN)/xpb completions bash > $(bashdir)/xpb
	$(BIN)/xpbd --completions bash > $(bashdir)/xpbd
	$(BIN)/xpb completions zsh > $(zshdir)/_xpb
	$(BIN)/xpbd --completions zsh > $(zshdir)/_xpbd
	$(BIN)/xpb completions fish > $(fishdir)/xpb.fish
	$(BIN)/xpbd --completions fish > $(fishdir)/xpbd.fish
	sed 's|^ExecStart=.*|ExecStart=$(PREFIX)/bin/xpbd|' Contrib/xpbd.service > $(unitdir)/xpbd.service
	sed 's|^Exec=xpbd|Exec=$(PREFIX)/bin/xpbd|' Contrib/xpbd.desktop > $(sharedir)/xpbd.desktop
	if [ "$(LINKS)" = 1 ]; then ln -sf xpb $(bindir)/xclip; ln -sf xpb $(bindir)/xsel; fi
	@echo "installed in $(DESTDIR)$(PREFIX); 'make enable PREFIX=$(PREFIX)' starts xpbd with every session"

# A systemd user manager takes the unit; without one, the autostart entry goes to ~/.config/autostart.
enable:
	@if systemctl --user show-environment >/dev/null 2>&1; then \
		install -Dm644 $(unitdir)/xpbd.service $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/systemd/user/xpbd.service; \
		[ -n "$${DISPLAY:-}" ] && systemctl --user import-environment DISPLAY XAUTHORITY 2>/dev/null || true; \
		systemctl --user daemon-reload; \
		systemctl --user enable --now xpbd.service; \
		echo "xpbd: enabled as a systemd user service; 'xpb daemon status' shows it"; \
	else \
		install -Dm644 $(sharedir)/xpbd.desktop $(AUTOSTART)/xpbd.desktop; \
		echo "xpbd: starts with your next session ($(AUTOSTART)/xpbd.desktop); start it now with: $(PREFIX)/bin/xpbd &"; \
	fi

uninstall:
	-@if systemctl --user show-environment >/dev/null 2>&1 && [ -f $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/systemd/user/xpbd.service ]; then \
		systemctl --user disable --now xpbd.service; \
	fi
	rm -f $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/systemd/user/xpbd.service
	if grep -qs "^Exec=$(PREFIX)/bin/xpbd" $(AUTOSTART)/xpbd.desktop; then rm -f $(AUTOSTART)/xpbd.desktop; fi
	rm -f $(bindir)/xpb $(bindir)/xpbd $(bindir)/xpbd-kdeconnect $(mandir)/xpb.1 $(mandir)/xpbd.1 $(mandir)/xpbd-kdeconnect.1
	rm -f $(bashdir)/xpb $(bashdir)/xpbd $(zshdir)/_xpb $(zshdir)/_xpbd $(fishdir)/xpb.fish $(fishdir)/xpbd.fish
	rm -f $(unitdir)/xpbd.service $(sharedir)/xpbd.desktop
	for link in xclip xsel; do if [ "$$(readlink $(bindir)/$$link)" = xpb ]; then rm -f $(bindir)/$$link; fi; done
	# The directories install created, deepest first, each only if nothing else is in it now.
	@if [ -f $(sharedir)/created-dirs ]; then \
		dirs=$$(sort -r $(sharedir)/created-dirs); rm -f $(sharedir)/created-dirs; \
		for dir in $$dirs; do rmdir "$$dir" 2>/dev/null || true; done; \
	fi
	-@rmdir $(sharedir) 2>/dev/null || true

clean:
	rm -rf $(SCRATCH)
