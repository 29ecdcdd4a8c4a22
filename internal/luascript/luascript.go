// Package luascript loads the project's Redis Lua scripts from embedded
// files: one script per .lua file, headed by a comment that states its KEYS,
// ARGV and returns. EVAL has no imports, so a script names the libraries it
// calls on a header line
//
//	-- uses: lib_sale, lib_order
//
// and the loader prepends them, each once, libraries a library uses before
// it. A library is a lib_*.lua file of the same directory or of a directory
// this one links to (stock's lib_sale.lua serves the order scripts).
package luascript

import (
	"bufio"
	"fmt"
	"io/fs"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Dir is a directory of scripts and the directories whose libraries they
// may use.
type Dir struct {
	fsys  fs.FS
	links []*Dir
}

// New returns the scripts in directory dir of fsys (an embed.FS of
// "scripts/*.lua", say); their "uses" lines may name libraries of links too.
func New(fsys fs.FS, dir string, links ...*Dir) *Dir {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("luascript: %s: %v", dir, err)) // a build mistake
	}
	return &Dir{fsys: sub, links: links}
}

// Script returns the script in name.lua with its libraries prepended. A
// missing file or library is a build mistake, caught by every test of the
// package that declares the script: it panics.
func (d *Dir) Script(name string) *redis.Script {
	src, err := d.Source(name)
	if err != nil {
		panic(err)
	}
	return redis.NewScript(src)
}

// Source is the text Script runs: the libraries name uses, then name.
func (d *Dir) Source(name string) (string, error) {
	var b strings.Builder
	seen := map[string]bool{}
	if err := d.add(&b, name, seen, nil); err != nil {
		return "", err
	}
	return b.String(), nil
}

// add writes name's libraries, then name, to b; stack catches a cycle.
func (d *Dir) add(b *strings.Builder, name string, seen map[string]bool, stack []string) error {
	for _, s := range stack {
		if s == name {
			return fmt.Errorf("luascript: %s uses itself: %s", name, strings.Join(append(stack, name), " -> "))
		}
	}
	src, owner, err := d.find(name)
	if err != nil {
		return err
	}
	uses, err := usesOf(name, src)
	if err != nil {
		return err
	}
	for _, lib := range uses {
		if seen[lib] {
			continue
		}
		if !strings.HasPrefix(lib, "lib_") {
			return fmt.Errorf("luascript: %s uses %s: only lib_*.lua files are libraries", name, lib)
		}
		// A library is looked up from the directory that named it, so a
		// linked directory's library finds its own neighbours.
		if err := owner.add(b, lib, seen, append(stack, name)); err != nil {
			return err
		}
	}
	seen[name] = true
	b.WriteString(src)
	if !strings.HasSuffix(src, "\n") {
		b.WriteByte('\n')
	}
	return nil
}

// find reads name.lua from d, or else from its links (depth first).
func (d *Dir) find(name string) (string, *Dir, error) {
	if src, err := fs.ReadFile(d.fsys, name+".lua"); err == nil {
		return string(src), d, nil
	}
	for _, l := range d.links {
		if src, owner, err := l.find(name); err == nil {
			return src, owner, nil
		}
	}
	return "", nil, fmt.Errorf("luascript: no script %s.lua", name)
}

// usesOf reads the "-- uses:" line of src's leading comment block.
func usesOf(name, src string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(src))
	found := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "--") {
			break // the header ends at the first line of code
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(line, "--")), "uses:")
		if !ok {
			continue
		}
		if found {
			return nil, fmt.Errorf("luascript: %s has two uses: lines", name)
		}
		found = true
		for _, f := range strings.Split(rest, ",") {
			if f = strings.TrimSuffix(strings.TrimSpace(f), ".lua"); f != "" {
				out = append(out, f)
			}
		}
	}
	return out, nil
}
