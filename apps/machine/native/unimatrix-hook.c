/*
 * unimatrix-hook-native: the hook's round trip to the machine daemon's door with nothing to start
 * but itself. `bin/unimatrix-hook` (sh) runs it when it was built (`npm run build` compiles it
 * when a C compiler is present) and falls back to curl, then to the Node hook, when it is not.
 *
 * It speaks the door's HTTP face exactly as the curl client does: `POST /v1/hook/<event>` with the
 * host's hook JSON (stdin) and the harness, format, drone token and drone id as headers; a 200
 * carries exactly the bytes to print. Once they are written to stdout, `POST /v1/handed` on the
 * same connection tells the daemon they are in front of the model (the `delivered` receipt); the
 * client exits without waiting for its answer. An empty answer is not followed by `handed`.
 *
 *   unimatrix-hook-native <door socket> <event> <harness> <format> [<fallback> <argument>...]
 *   env: UNIMATRIX_DRONE_TOKEN, UNIMATRIX_DRONE_ID (optional)
 *
 * Exit 0 always, as the Node hook (a hook must never fail the host's turn), except when the door
 * cannot be reached: then nothing was read from stdin and the caller takes another way. Given a
 * fallback, this process becomes it (execv, with UNIMATRIX_HOOK_NATIVE=0 so that it does not come
 * back here): the sh client execs this client, so the host waits on one process, not two.
 * Without one, it exits 111.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define UNREACHABLE 111
#define MAX_INPUT (1024 * 1024 + 1)
#define MAX_ANSWER (4 * 1024 * 1024)

static const char *event_name = "";

static int fail(const char *what) {
  fprintf(stderr, "unimatrix hook %s: %s\n", event_name, what);
  return 0;
}

static int write_all(int fd, const char *data, size_t length) {
  while (length > 0) {
    ssize_t n = write(fd, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    data += n;
    length -= (size_t)n;
  }
  return 0;
}

/* A header value the door may receive: no CR, LF or other control character. */
static int clean(const char *value) {
  for (const unsigned char *c = (const unsigned char *)value; *c; c++)
    if (*c < 0x20 || *c == 0x7f) return 0;
  return 1;
}

/* Reads one HTTP/1.1 response from `fd` into `buffer` (headers and a Content-Length body). */
static int read_response(int fd, char *buffer, size_t capacity, int *status, char **body, size_t *body_length) {
  size_t used = 0;
  char *end = NULL;
  while (!end) {
    if (used + 1 >= capacity) return -1;
    ssize_t n = read(fd, buffer + used, capacity - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    used += (size_t)n;
    buffer[used] = '\0';
    end = strstr(buffer, "\r\n\r\n");
  }
  if (sscanf(buffer, "HTTP/1.%*d %d", status) != 1) return -1;
  size_t length = 0;
  for (char *line = strstr(buffer, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
    if (strncasecmp(line + 2, "content-length:", 15) == 0) length = strtoul(line + 17, NULL, 10);
  }
  *body = end + 4;
  size_t have = used - (size_t)(*body - buffer);
  if ((size_t)(*body - buffer) + length >= capacity) return -1;
  while (have < length) {
    ssize_t n = read(fd, *body + have, length - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    have += (size_t)n;
  }
  *body_length = length;
  return 0;
}

/* The door cannot be reached and stdin is untouched: become the fallback, or tell the caller. */
static int unreachable(int argc, char **argv) {
  if (argc <= 5) return UNREACHABLE;
  setenv("UNIMATRIX_HOOK_NATIVE", "0", 1);
  execv(argv[5], argv + 5);
  fprintf(stderr, "unimatrix hook %s: could not run %s: %s\n", event_name, argv[5], strerror(errno));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) return fail("usage: unimatrix-hook-native <door> <event> <harness> <format> [<fallback>...]");
  const char *door = argv[1];
  event_name = argv[2];
  const char *token = getenv("UNIMATRIX_DRONE_TOKEN");
  const char *drone = getenv("UNIMATRIX_DRONE_ID");

  struct sockaddr_un address;
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  if (strlen(door) >= sizeof address.sun_path) return unreachable(argc, argv);
  strcpy(address.sun_path, door);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
    if (fd >= 0) close(fd);
    return unreachable(argc, argv);
  }
  struct timeval five = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &five, sizeof five);

  char *input = malloc(MAX_INPUT);
  size_t input_length = 0;
  if (!input) return fail("out of memory");
  for (;;) {
    ssize_t n = read(0, input + input_length, MAX_INPUT - input_length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || (input_length += (size_t)n) == MAX_INPUT) break;
  }

  for (int i = 2; i <= 4; i++)
    if (!clean(argv[i])) return fail("an argument holds a control character");
  if ((token && !clean(token)) || (drone && !clean(drone)))
    return fail("UNIMATRIX_DRONE_TOKEN or UNIMATRIX_DRONE_ID holds a control character");
  size_t head_capacity = 512 + strlen(argv[2]) + strlen(argv[3]) + strlen(argv[4]) + (token ? strlen(token) : 0) +
                         (drone ? strlen(drone) : 0);
  char *head = malloc(head_capacity);
  if (!head) return fail("out of memory");
  int head_length = snprintf(head, head_capacity,
                             "POST /v1/hook/%s HTTP/1.1\r\nHost: door\r\nX-Unimatrix-Harness: %s\r\n"
                             "X-Unimatrix-Format: %s\r\n%s%s%s%s%s%sContent-Length: %zu\r\n\r\n",
                             argv[2], argv[3], argv[4], token ? "X-Unimatrix-Drone-Token: " : "", token ? token : "",
                             token ? "\r\n" : "", drone ? "X-Unimatrix-Drone-Id: " : "", drone ? drone : "",
                             drone ? "\r\n" : "", input_length);
  if (write_all(fd, head, (size_t)head_length) || write_all(fd, input, input_length))
    return fail("the door closed the connection");

  char *answer = malloc(MAX_ANSWER);
  char *body = NULL;
  size_t body_length = 0;
  int status = 0;
  if (!answer || read_response(fd, answer, MAX_ANSWER, &status, &body, &body_length) != 0)
    return fail("the door did not answer within 5 s");
  if (status != 200) {
    fprintf(stderr, "unimatrix hook %s: the door refused the request (%d): %.*s", event_name, status, (int)body_length,
            body);
    return 0;
  }
  if (body_length == 0) return 0; /* nothing printed, so nothing to hand */
  if (write_all(1, body, body_length) != 0) return fail("could not write the answer");
  /*
   * Printed: the items are in front of the model. The door records them handed as it reads this
   * request, whether or not we are still here, so the host is not kept waiting for the answer
   * (the door's journal write and its confirmation to presence run after the hook has exited).
   */
  static const char handed[] = "POST /v1/handed HTTP/1.1\r\nHost: door\r\nContent-Length: 0\r\n\r\n";
  if (write_all(fd, handed, sizeof handed - 1) != 0) return fail("the door closed before the items were handed");
  return 0;
}
