// Package deploy holds the deployment files' tests: there is no Docker engine
// in CI, so they check what can be checked without one. The compose file
// (../docker-compose.yml) is validated and expanded by docker-compose itself
// and its topology asserted; the sentinels' command is run as their
// containers run it and the configuration it writes runs on the real
// redis-server --sentinel against throwaway servers, through a failover;
// nginx/nginx.conf passes `nginx -t`; the Dockerfile's build stage is
// replayed with the local Go toolchain on the context .dockerignore lets
// through. The package has no code of its own.
package deploy
