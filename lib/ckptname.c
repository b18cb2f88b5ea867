#include "lib/ckptname.h"

#include <string.h>

static bool lower_or_digit(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool ckpt_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 1 || n > CKPT_NAME_MAX || !lower_or_digit(s[0]))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!lower_or_digit(s[i]) && s[i] != '.' && s[i] != '-')
			return false;
	return true;
}

int ckpt_name_check(const char *s, struct verr *err)
{
	if (ckpt_name_ok(s))
		return 0;
	/* The name is the user's: cut, and shown in quotes. */
	return verr_set(err, "'%.64s' is not a checkpoint's name (JOB.N, such as 17.1: lower-case letters, digits, "
			"'.' and '-', at most 64, starting with a letter or digit)", s);
}
