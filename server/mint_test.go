package server_test

import (
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func mintRaw(secret []byte, user int64, ttl time.Duration) (string, error) {
	now := time.Now()
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": strconv.FormatInt(user, 10), "exp": now.Add(ttl).Unix(), "iat": now.Unix(),
	}).SignedString(secret)
}
