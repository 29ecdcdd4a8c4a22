package httpapi

import "strings"

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header value, for the shoppers' JWTs and the admin token alike. The
// scheme is matched in any case ("bearer", "BEARER": RFC 9110 11.1 makes
// auth schemes case-insensitive), and one or more spaces part it from the
// token (1*SP). ok is false for another scheme, or no token.
func bearerToken(header string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(rest, " ")
	return token, token != ""
}
