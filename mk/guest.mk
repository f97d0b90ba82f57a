# A guest kernel with ublk for tests/guest (see tests/guest/README.md).
# These machines' own kernels have no ublk, so the guest tests boot
# Debian's bookworm-backports cloud kernel under QEMU with TCG. QEMU comes
# from bookworm-backports too: bookworm's 7.2 crashes the guest at its
# first swap-out under TCG.
DEPS_TARGETS += deps-guest

# Outside the repository: the kernel package is ~70 MB and is kept between
# runs, so CI downloads it once per machine.
GUEST_CACHE   ?= /var/cache/s4d-guest
# The modules the guest tests load; their dependencies (modules.dep) come too.
GUEST_MODULES ?= ublk_drv zram nbd loop
QEMU_MIN      := 10

.PHONY: deps-guest deps-guest-pkgs deps-guest-kernel
deps-guest: deps-guest-pkgs deps-guest-kernel

# The backports suite reuses the URI of the machine's own Debian source (a
# mirror or snapshot): mk/add-backports.sh, shared with webgpu.mk and remote.mk.
# busybox must be the static one: the guest has no libc of its own.
deps-guest-pkgs:
	@set -e; \
	qv=$$(qemu-system-x86_64 --version 2>/dev/null | sed -n 's/^QEMU emulator version \([0-9]*\).*/\1/p'); \
	if [ -n "$$qv" ] && [ "$$qv" -ge $(QEMU_MIN) ] && [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 && \
	   command -v cpio >/dev/null; then exit 0; fi; \
	codename=$$(. /etc/os-release && echo $$VERSION_CODENAME); \
	distro=$$(. /etc/os-release && echo $$ID); \
	if [ "$$distro" != debian ]; then \
		apt-get update -qq; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 busybox-static cpio; \
		exit 0; \
	fi; \
	sh mk/add-backports.sh; \
	apt-get update -qq; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static cpio; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -t $$codename-backports qemu-system-x86; \
	qemu-system-x86_64 --version | head -n 1

# The kernel: the package the backports meta-package linux-image-cloud-amd64
# names, fetched with apt-get download (nothing installed on the host),
# unpacked, and reduced to what the guest needs: $(GUEST_CACHE)/vmlinuz,
# modules/NAME.ko (decompressed) and modules/deps ("NAME: direct deps").
# The package has no modules.dep (depmod makes it at install), so each
# module's deps come from its own .modinfo "depends=". A flock keeps two
# builds from racing.
deps-guest-kernel: deps-guest-pkgs
	@set -e; mkdir -p $(GUEST_CACHE); exec 9>$(GUEST_CACHE)/.lock; flock 9; \
	want="$(GUEST_MODULES)"; \
	if [ -f $(GUEST_CACHE)/ok ] && [ "$$(sed -n 2p $(GUEST_CACHE)/ok)" = "$$want" ]; then exit 0; fi; \
	codename=$$(. /etc/os-release && echo $$VERSION_CODENAME); \
	meta() { apt-cache show linux-image-cloud-amd64/$$codename-backports 2>/dev/null | \
		sed -n 's/^Depends: \(linux-image-[^ ,]*-cloud-amd64\).*/\1/p' | head -n 1; }; \
	pkg=$$(meta); [ -n "$$pkg" ] || { apt-get update -qq; pkg=$$(meta); }; \
	case "$$pkg" in linux-image-6.12.*-cloud-amd64) ;; \
		*) echo "no linux-image-6.12.*-cloud-amd64 in $$codename-backports (got '$$pkg'); run make deps-guest-pkgs" >&2; exit 1;; esac; \
	tmp=$(GUEST_CACHE)/tmp; rm -rf $$tmp; mkdir -p $$tmp/deb; chmod 0755 $$tmp $$tmp/deb; \
	( cd $$tmp/deb && apt-get download -qq $$pkg/$$codename-backports 2>&1 | grep -v unsandboxed || true ); \
	ls $$tmp/deb/*.deb >/dev/null; dpkg-deb -x $$tmp/deb/*.deb $$tmp/root; \
	kver=$${pkg#linux-image-}; mdir=$$tmp/root/lib/modules/$$kver; \
	[ -d $$mdir ] || mdir=$$tmp/root/usr/lib/modules/$$kver; \
	[ -f $$tmp/root/boot/vmlinuz-$$kver ] && [ -d $$mdir/kernel ] || { echo "$$pkg: no vmlinuz or modules" >&2; exit 1; }; \
	rm -rf $(GUEST_CACHE)/modules $(GUEST_CACHE)/ok; mkdir -p $(GUEST_CACHE)/modules; \
	cp $$tmp/root/boot/vmlinuz-$$kver $(GUEST_CACHE)/vmlinuz; \
	( cd $$mdir && find kernel -name '*.ko*' ) | awk '{ n=$$0; sub(".*/","",n); sub("[.]ko.*","",n); gsub("-","_",n); print n, $$0 }' > $$tmp/index; \
	todo="$$want"; done=""; \
	while set -- $$todo; [ $$# -gt 0 ]; do \
		m=$$1; shift; todo="$$*"; \
		case " $$done " in *" $$m "*) continue;; esac; done="$$done $$m"; \
		f=$$(awk -v m="$$m" '$$1==m { print $$2; exit }' $$tmp/index); \
		if [ -z "$$f" ]; then \
			tr - _ < $$mdir/modules.builtin | grep -q "/$$m[.]ko" && { echo "$$m: built in"; continue; }; \
			echo "module $$m not in $$pkg" >&2; exit 1; \
		fi; \
		case "$$f" in *.xz) xz -dc $$mdir/$$f;; *.zst) zstd -qdc $$mdir/$$f;; *.gz) gzip -dc $$mdir/$$f;; *) cat $$mdir/$$f;; esac \
			> $(GUEST_CACHE)/modules/$$m.ko; \
		deps=$$(tr '\0' '\n' < $(GUEST_CACHE)/modules/$$m.ko | sed -n 's/^depends=//p' | head -n 1 | tr ,- ' _'); \
		echo "$$m: $$deps" >> $(GUEST_CACHE)/modules/deps; \
		todo="$$todo $$deps"; \
	done; \
	printf '%s\n%s\n' "$$kver" "$$want" > $(GUEST_CACHE)/ok.tmp; \
	rm -rf $$tmp; mv $(GUEST_CACHE)/ok.tmp $(GUEST_CACHE)/ok; \
	echo "guest kernel $$kver in $(GUEST_CACHE): $$(cd $(GUEST_CACHE)/modules && ls *.ko | sed 's/[.]ko$$//' | tr '\n' ' ')"

# The guest tests alone, with their measurements (boot, swap throughput,
# swap-in latency, ratios to zram) in the log.
.PHONY: test-guest
test-guest: deps-guest
	S4D_GUEST_RECOVERY=1 $(GO) test -count=1 -timeout 20m -run 'TestGuest' -v ./tests
