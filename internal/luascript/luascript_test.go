package luascript

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestSource_prependsEachLibraryOnce_libraryUsesFirst(t *testing.T) {
	sale := New(fstest.MapFS{
		"s/lib_sale.lua": {Data: []byte("-- lib_sale\n-- uses: lib_time\nSALE\n")},
		"s/lib_time.lua": {Data: []byte("-- lib_time\nTIME")}, // no final newline
	}, "s")
	order := New(fstest.MapFS{
		"lib_order.lua": {Data: []byte("-- lib_order\n-- uses: lib_sale\nORDER\n")},
		"accept.lua":    {Data: []byte("-- accept\n--\n-- uses: lib_sale, lib_order.lua\n-- KEYS[1] x\nACCEPT\n-- uses: lib_nope\n")},
		"plain.lua":     {Data: []byte("-- plain\n\n-- uses: lib_nope (after the header: not read)\nPLAIN\n")},
	}, ".", sale)

	for name, want := range map[string][]string{
		"accept": {"TIME", "SALE", "ORDER", "ACCEPT"},
		"plain":  {"PLAIN"},
	} {
		src, err := order.Source(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, line := range strings.Split(src, "\n") {
			if line != "" && !strings.HasPrefix(line, "--") {
				got = append(got, line)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: code lines %v, want %v\n%s", name, got, want, src)
		}
	}
}

func TestSource_mistakesAreErrors(t *testing.T) {
	d := New(fstest.MapFS{
		"missing.lua": {Data: []byte("-- uses: lib_gone\nX\n")},
		"notlib.lua":  {Data: []byte("-- uses: other\nX\n")},
		"other.lua":   {Data: []byte("Y\n")},
		"lib_a.lua":   {Data: []byte("-- uses: lib_b\nA\n")},
		"lib_b.lua":   {Data: []byte("-- uses: lib_a\nB\n")},
		"cycle.lua":   {Data: []byte("-- uses: lib_a\nC\n")},
		"twice.lua":   {Data: []byte("-- uses: lib_a\n-- uses: lib_b\nC\n")},
	}, ".")
	for name, want := range map[string]string{
		"nope":    "no script nope.lua",
		"missing": "no script lib_gone.lua",
		"notlib":  "only lib_*.lua files are libraries",
		"cycle":   "uses itself",
		"twice":   "two uses: lines",
	} {
		if _, err := d.Source(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Script of a missing file did not panic")
		}
	}()
	d.Script("nope")
}
