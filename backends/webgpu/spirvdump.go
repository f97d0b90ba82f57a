package webgpu

/*
#include <stdio.h>
#include "glue.h"

// Dawn's logging callback (wgpuDeviceSetLoggingCallback, webgpu.h 2025:
// WGPULoggingCallbackInfo by value): each message is appended to a
// growing C buffer, NUL-terminated, so that Go splits them afterwards.
typedef struct { char* b; size_t n, cap; } s4d_logbuf;
static void s4d_on_log(uint32_t type, WGPUStringView m, void* u1, void* u2) {
    s4d_logbuf* l = u1;
    size_t n = m.data == NULL ? 0 : (m.length == SIZE_MAX ? strlen(m.data) : m.length);
    if (l->n + n + 1 > l->cap) {
        size_t c = (l->n + n + 1) * 2;
        char* nb = realloc(l->b, c);
        if (nb == NULL) return;
        l->b = nb; l->cap = c;
    }
    if (n > 0) memcpy(l->b + l->n, m.data, n);
    l->n += n;
    l->b[l->n++] = 0;
}
typedef struct { void* next; void* cb; void* u1; void* u2; } s4d_loginfo;
typedef void (*PFN_SetLogging)(WGPUDevice, s4d_loginfo);
static void s4d_set_logging(void* fn, WGPUDevice d, s4d_logbuf* l) {
    s4d_loginfo i = {NULL, (void*)s4d_on_log, l, NULL};
    ((PFN_SetLogging)fn)(d, i);
}
static void s4d_logbuf_free(s4d_logbuf* l) { free(l->b); l->b = NULL; l->n = l->cap = 0; }

// The SPIRV-Tools C API that Dawn's library exports (libspirv.h): the
// assembler and disassembler of the same revision that wrote the dump.
typedef struct { uint32_t* code; size_t wordCount; } s4d_spv_binary;
typedef struct { const uint32_t* code; size_t wordCount; } s4d_spv_cbinary;
typedef struct { char* str; size_t length; } s4d_spv_text;
typedef struct { size_t line, column, index; } s4d_spv_pos;
typedef struct { s4d_spv_pos position; char* error; _Bool isTextSource; } s4d_spv_diag;
typedef struct {
    void* contextCreate; void* contextDestroy; void* parseTargetEnv; void* textToBinary;
    void* binaryToText; void* validate; void* binaryDestroy; void* textDestroy; void* diagDestroy;
} s4d_spvtools;
typedef void* (*PFN_spvContextCreate)(int);
typedef void (*PFN_spvContextDestroy)(void*);
typedef _Bool (*PFN_spvParseTargetEnv)(const char*, int*);
typedef int (*PFN_spvTextToBinaryWithOptions)(void*, const char*, size_t, uint32_t, s4d_spv_binary**, s4d_spv_diag**);
typedef int (*PFN_spvBinaryToText)(void*, const uint32_t*, size_t, uint32_t, s4d_spv_text**, s4d_spv_diag**);
typedef int (*PFN_spvValidate)(void*, const s4d_spv_cbinary*, s4d_spv_diag**);
typedef void (*PFN_spvDestroy)(void*);

static void s4d_spv_err(s4d_spvtools* t, s4d_spv_diag* dg, int r, char* why, size_t n) {
    snprintf(why, n, "result %d at line %zu: %s", r, dg ? dg->position.line + 1 : 0, dg && dg->error ? dg->error : "");
    if (dg) ((PFN_spvDestroy)t->diagDestroy)(dg);
}

// s4d_spv_assemble: text (numeric IDs kept) to words in *out (malloc'ed).
static int s4d_spv_assemble(s4d_spvtools* t, const char* env, const char* text, size_t n, uint32_t** out, size_t* words, char* why, size_t whyn) {
    int e = 0;
    if (!((PFN_spvParseTargetEnv)t->parseTargetEnv)(env, &e)) { snprintf(why, whyn, "unknown target %s", env); return -1; }
    void* c = ((PFN_spvContextCreate)t->contextCreate)(e);
    s4d_spv_binary* b = NULL; s4d_spv_diag* dg = NULL;
    // 2: SPV_TEXT_TO_BINARY_OPTION_PRESERVE_NUMERIC_IDS
    int r = ((PFN_spvTextToBinaryWithOptions)t->textToBinary)(c, text, n, 2, &b, &dg);
    if (r == 0) {
        *words = b->wordCount;
        *out = malloc(b->wordCount * 4);
        memcpy(*out, b->code, b->wordCount * 4);
        ((PFN_spvDestroy)t->binaryDestroy)(b);
    } else s4d_spv_err(t, dg, r, why, whyn);
    ((PFN_spvContextDestroy)t->contextDestroy)(c);
    return r;
}

// s4d_spv_disassemble: words to text with the given options (malloc'ed).
static int s4d_spv_disassemble(s4d_spvtools* t, const char* env, const uint32_t* w, size_t words, uint32_t opts, char** out, char* why, size_t whyn) {
    int e = 0;
    if (!((PFN_spvParseTargetEnv)t->parseTargetEnv)(env, &e)) { snprintf(why, whyn, "unknown target %s", env); return -1; }
    void* c = ((PFN_spvContextCreate)t->contextCreate)(e);
    s4d_spv_text* tx = NULL; s4d_spv_diag* dg = NULL;
    int r = ((PFN_spvBinaryToText)t->binaryToText)(c, w, words, opts, &tx, &dg);
    if (r == 0) {
        *out = malloc(tx->length + 1);
        memcpy(*out, tx->str, tx->length);
        (*out)[tx->length] = 0;
        ((PFN_spvDestroy)t->textDestroy)(tx);
    } else s4d_spv_err(t, dg, r, why, whyn);
    ((PFN_spvContextDestroy)t->contextDestroy)(c);
    return r;
}

static int s4d_spv_validate(s4d_spvtools* t, const char* env, const uint32_t* w, size_t words, char* why, size_t whyn) {
    int e = 0;
    if (!((PFN_spvParseTargetEnv)t->parseTargetEnv)(env, &e)) { snprintf(why, whyn, "unknown target %s", env); return -1; }
    void* c = ((PFN_spvContextCreate)t->contextCreate)(e);
    s4d_spv_cbinary b = {w, words};
    s4d_spv_diag* dg = NULL;
    int r = ((PFN_spvValidate)t->validate)(c, &b, &dg);
    if (r != 0) s4d_spv_err(t, dg, r, why, whyn);
    else if (dg) ((PFN_spvDestroy)t->diagDestroy)(dg);
    ((PFN_spvContextDestroy)t->contextDestroy)(c);
    return r;
}
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"unsafe"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

// DumpKernel is one WGSL kernel for DumpSPIRV.
type DumpKernel struct{ Name, WGSL, Entry string }

// ShaderDump is what DumpSPIRV got from Dawn.
type ShaderDump struct {
	Device  string            // the adapter, as the engine describes it
	Toggles string            // every toggle the device used (Dawn's list)
	Text    map[string]string // kernel name: the SPIR-V disassembly Dawn logged
}

// DumpSPIRV builds each kernel's compute pipeline on a Dawn device opened
// with the given toggles plus dump_shaders, and returns the SPIR-V
// disassembly Dawn logs for it: the module its Vulkan backend (Tint)
// handed to the driver. Dawn only (the toggle and the logging callback
// are Dawn's); a CPU adapter (lavapipe) is taken.
func DumpSPIRV(lib string, toggles []string, ks []DumpKernel) (*ShaderDump, error) {
	d, err := openDevice(lib, true, false, strings.Join(append(append([]string{}, toggles...), "dump_shaders"), ","))
	if err != nil {
		return nil, err
	}
	defer d.close()
	_, path, err := loadLib(lib)
	if err != nil {
		return nil, err
	}
	l, err := dl.Open(path)
	if err != nil {
		return nil, err
	}
	setLog, err := l.Sym("wgpuDeviceSetLoggingCallback")
	if err != nil {
		return nil, fmt.Errorf("webgpu: %s has no logging callback: %w", path, err)
	}
	out := &ShaderDump{Device: d.desc, Text: map[string]string{}}
	err = d.do(func() error {
		lb := (*C.s4d_logbuf)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4d_logbuf{}))))
		defer C.free(unsafe.Pointer(lb))
		defer C.s4d_logbuf_free(lb)
		C.s4d_set_logging(setLog, d.dev, lb)
		if f := togglesUsedFn[d.p]; f != nil {
			buf := make([]C.char, 1<<14)
			C.s4d_toggles_used(f, d.dev, &buf[0], C.size_t(len(buf)))
			out.Toggles = C.GoString(&buf[0])
		}
		for _, k := range ks {
			C.s4d_logbuf_free(lb)
			if k.Subgroups() && !d.subgroups {
				return fmt.Errorf("webgpu: %s needs subgroups, which %s does not offer", k.Name, d.desc)
			}
			pl, err := d.pipeline(k.WGSL, k.Entry)
			if err != nil {
				return fmt.Errorf("webgpu: %s: %w", k.Name, err)
			}
			C.s4d_pipeline_free(d.p, pl)
			var msgs []string
			if lb.n > 0 {
				msgs = strings.Split(strings.TrimSuffix(C.GoStringN(lb.b, C.int(lb.n)), "\x00"), "\x00")
			}
			const mark = "/* Dumped generated SPIRV disassembly */"
			var got []string
			for _, m := range msgs {
				if _, t, ok := strings.Cut(m, mark); ok {
					got = append(got, strings.TrimPrefix(t, "\n"))
				}
			}
			if len(got) != 1 {
				return fmt.Errorf("webgpu: %s: Dawn logged %d SPIR-V modules, want 1 (%d messages)", k.Name, len(got), len(msgs))
			}
			out.Text[k.Name] = got[0]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DefaultToggles are the Dawn toggles the webgpu runtime asks for unless
// told otherwise.
func DefaultToggles() []string { return append([]string(nil), defaultToggles...) }

// Subgroups reports whether the kernel's WGSL enables subgroups.
func (k DumpKernel) Subgroups() bool { return strings.Contains(k.WGSL, "enable subgroups;") }

// spvTools resolves the SPIRV-Tools entry points from the library (Dawn
// links SPIRV-Tools in and exports its C API).
func spvTools(lib string) (*C.s4d_spvtools, error) {
	_, path, err := loadLib(lib)
	if err != nil {
		return nil, err
	}
	l, err := dl.Open(path)
	if err != nil {
		return nil, err
	}
	t := (*C.s4d_spvtools)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4d_spvtools{}))))
	names := []string{"spvContextCreate", "spvContextDestroy", "spvParseTargetEnv", "spvTextToBinaryWithOptions",
		"spvBinaryToText", "spvValidate", "spvBinaryDestroy", "spvTextDestroy", "spvDiagnosticDestroy"}
	slots := unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(t)), len(names))
	for i, n := range names {
		if slots[i], err = l.Sym(n); err != nil {
			C.free(unsafe.Pointer(t))
			return nil, fmt.Errorf("webgpu: %s exports no SPIRV-Tools: %w", path, err)
		}
	}
	return t, nil
}

var (
	versionRE   = regexp.MustCompile(`(?m)^; Version: (\d+)\.(\d+)$`)
	generatorRE = regexp.MustCompile(`(?m)^; Generator: (.*); (\d+)$`)
)

// generators are the SPIR-V generator IDs (the Khronos registry) of the
// compilers whose disassembly AssembleDump takes.
var generators = map[string]uint32{"Google Tint Compiler": 23}

// AssembleDump turns a module's disassembly, as Dawn logs it (friendly
// names, indented), back into its binary with the SPIRV-Tools of the same
// library: numeric IDs keep their values, named ones get the free ones,
// and the header's version and generator are the dump's. It checks that
// the binary disassembles to the same text again (the header's ID bound
// aside) and validates it for targetEnv (e.g. "vulkan1.2").
func AssembleDump(lib, text, targetEnv string) ([]byte, error) {
	t, err := spvTools(lib)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(t))
	v := versionRE.FindStringSubmatch(text)
	g := generatorRE.FindStringSubmatch(text)
	if v == nil || g == nil {
		return nil, fmt.Errorf("webgpu: the dump has no version or generator line")
	}
	gen, ok := generators[g[1]]
	if !ok {
		return nil, fmt.Errorf("webgpu: unknown generator %q", g[1])
	}
	var gv uint32
	fmt.Sscan(g[2], &gv)
	env := C.CString("spv" + v[1] + "." + v[2])
	defer C.free(unsafe.Pointer(env))
	ct := C.CString(text)
	defer C.free(unsafe.Pointer(ct))
	var why [512]C.char
	var words *C.uint32_t
	var n C.size_t
	if r := C.s4d_spv_assemble(t, env, ct, C.size_t(len(text)), &words, &n, &why[0], C.size_t(len(why))); r != 0 {
		return nil, fmt.Errorf("webgpu: assembling the dump: %s", C.GoString(&why[0]))
	}
	defer C.free(unsafe.Pointer(words))
	w := unsafe.Slice((*uint32)(unsafe.Pointer(words)), int(n))
	if len(w) < 5 {
		return nil, fmt.Errorf("webgpu: %d words", len(w))
	}
	w[2] = gen<<16 | gv
	// Again to text, as Dawn prints it (INDENT | FRIENDLY_NAMES): the
	// same text up to the IDs' numbering (which names like %_struct_3
	// carry), or the assembler changed something.
	var back *C.char
	if r := C.s4d_spv_disassemble(t, env, words, n, 8|64, &back, &why[0], C.size_t(len(why))); r != 0 {
		return nil, fmt.Errorf("webgpu: disassembling the module: %s", C.GoString(&why[0]))
	}
	again := C.GoString(back)
	C.free(unsafe.Pointer(back))
	if a, b := canonicalIDs(again), canonicalIDs(text); a != b {
		return nil, fmt.Errorf("webgpu: the assembled module disassembles to other text than the dump's")
	}
	venv := C.CString(targetEnv)
	defer C.free(unsafe.Pointer(venv))
	if r := C.s4d_spv_validate(t, venv, words, n, &why[0], C.size_t(len(why))); r != 0 {
		return nil, fmt.Errorf("webgpu: spirv-val (%s): %s", targetEnv, C.GoString(&why[0]))
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, w)
	return out.Bytes(), nil
}

var (
	idRE    = regexp.MustCompile(`%[A-Za-z0-9_.]+`)
	spaceRE = regexp.MustCompile(`[ \t]+`)
)

// canonicalIDs renames every ID of a disassembly by the order of its
// first use and drops the header's comments and the alignment padding:
// two texts agree iff their modules are the same but for the IDs' numbers.
func canonicalIDs(text string) string {
	ids := map[string]string{}
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, ";") {
			continue
		}
		l = idRE.ReplaceAllStringFunc(l, func(id string) string {
			if c, ok := ids[id]; ok {
				return c
			}
			c := fmt.Sprintf("%%%d", len(ids))
			ids[id] = c
			return c
		})
		b.WriteString(strings.TrimSpace(spaceRE.ReplaceAllString(l, " ")))
		b.WriteByte('\n')
	}
	return b.String()
}
