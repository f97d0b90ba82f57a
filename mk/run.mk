# `s4d run`'s preload library (clients/preload/s4d_run.c), built beside the binary
# and installed where the binary looks for it (../lib/s4d from bindir).
CC          ?= cc
RUN_LIB     := bin/libs4d-run.so
RUN_LIBDIR  ?= $(PREFIX)/lib/s4d

.PHONY: install-run-lib uninstall-run-lib
build: $(RUN_LIB)
$(RUN_LIB): clients/preload/s4d_run.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -Wall -Wextra -Werror -o $@ $< -ldl -lpthread

INSTALL_TARGETS += install-run-lib
UNINSTALL_TARGETS += uninstall-run-lib
install-run-lib: $(RUN_LIB)
	install -D -m 0644 $(RUN_LIB) $(DESTDIR)$(RUN_LIBDIR)/libs4d-run.so
uninstall-run-lib:
	rm -f $(DESTDIR)$(RUN_LIBDIR)/libs4d-run.so
