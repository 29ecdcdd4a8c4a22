package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// docs/scripts holds every script the service loads, whole, as Redis runs
// it: generated, and kept current here. A change to a .lua file or to how
// scripts are assembled fails this test until the files are written again
// (`go run ./cmd/api scripts --write docs/scripts`), so a reviewer sees the
// whole script change in the diff.
func TestScripts_docsHoldEveryScriptAsRedisRunsIt(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "scripts")
	set := scriptSet()
	for name, src := range set {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)+".lua"))
		if err != nil {
			t.Errorf("%s: %v (run: go run ./cmd/api scripts --write docs/scripts)", name, err)
			continue
		}
		if string(got) != scriptText(name, src) {
			t.Errorf("docs/scripts/%s.lua is not the script the service loads (run: go run ./cmd/api scripts --write docs/scripts)", name)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.lua"))
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		if _, ok := set[strings.TrimSuffix(filepath.ToSlash(rel), ".lua")]; !ok {
			t.Errorf("docs/scripts/%s is no script the service loads", rel)
		}
	}
	// Every script file of a package (but a library, lib_*.lua, whose
	// functions the scripts include) is one the set names: a script added
	// to a package and left out of its Scripts() would be loaded by the
	// service yet shown nowhere (save_payment.lua was, until 2026-11-26).
	for _, pkg := range []string{"redisstore", "stock", "lock"} {
		srcDir := filepath.Join("..", "..", "internal", pkg, "scripts")
		files, _ := filepath.Glob(filepath.Join(srcDir, "*.lua"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".lua")
			if strings.HasPrefix(name, "lib_") {
				continue
			}
			if _, ok := set[pkg+"/"+name]; !ok {
				t.Errorf("internal/%s/scripts/%s.lua is in no Scripts(): cmd/api scripts does not show it", pkg, name)
			}
		}
	}
	if len(set) < 20 || set["redisstore/place"] == "" || set["lock/obtain"] == "" || set["stock/load"] == "" {
		t.Fatalf("%d scripts, want every package's (place, obtain, load among them)", len(set))
	}
}

// `api scripts place` prints the order's script whole, headed by the SHA1
// Redis knows it by; an unknown name is an error naming the scripts.
func TestScripts_printsOneByName_withItsSHA1(t *testing.T) {
	var out bytes.Buffer
	if err := scripts([]string{"place"}, &out); err != nil {
		t.Fatal(err)
	}
	src := scriptSet()["redisstore/place"]
	sha := redis.NewScript(src).Hash()
	if !strings.HasPrefix(out.String(), "-- redisstore/place.lua, SHA1 "+sha) || !strings.HasSuffix(out.String(), src) {
		t.Fatalf("api scripts place printed:\n%.300s", out.String())
	}
	for _, want := range []string{"local function rate_limit(calls)", "local function accept(calls", "local function lock_holders(", "local function sale_decide("} {
		if !strings.Contains(src, want) {
			t.Errorf("the order's script lacks %q: not whole", want)
		}
	}
	if err := scripts([]string{"nope"}, &out); err == nil || !strings.Contains(err.Error(), "redisstore/place") {
		t.Fatalf("an unknown script: %v, want an error naming the scripts", err)
	}
}
