// Package docs holds the documentation's tests: README.md and the pages
// beside this file are read as a newcomer reads them, and what can be held
// is held — the README stays short, every relative link and heading it
// points to exists, every environment variable the service reads is in
// config.md with its default, and the README's real-servers block sets an
// environment the service starts with. The package has no code of its own.
package docs
