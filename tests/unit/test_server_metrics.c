/* test_server_metrics.c - Prometheus exposition and the access log line. */
#include "tests/rlx_test.h"
#include "server/metrics.h"

TEST(prometheus_text)
{
    rlx_metrics m;
    rlx_metrics_init(&m);
    rlx_metrics_request(&m, "completions", 200);
    rlx_metrics_request(&m, "completions", 200);
    rlx_metrics_request(&m, "chat_completions", 400);
    m.prompt_tokens = 12;
    m.generation_tokens = 34;
    rlx_histogram_observe(&m.ttft, 0.003);
    rlx_histogram_observe(&m.ttft, 100);
    rlx_metrics_model mm = {.name = "tiny", .running = 2, .waiting = 1, .kv_usage = 0.25, .prefix_queries = 10,
                            .prefix_hits = 4, .preemptions = 3, .state_slots_used = 5, .state_slots_total = 16,
                            .state_ckpt_entries = 7, .state_ckpt_bytes = 7000, .state_ckpt_hits = 9,
                            .state_ckpt_evictions = 2};
    m.version = "0.1.0";
    m.commit = "abc123";
    m.backend = "vu\"lkan"; /* label values are escaped */
    char *s = rlx_metrics_render(&m, &mm, 1);
    ASSERT(s != NULL);
    ASSERT_MSG(strstr(s, "# TYPE rlxd_build_info gauge\n"
                         "rlxd_build_info{version=\"0.1.0\",commit=\"abc123\",backend=\"vu\\\"lkan\"} 1\n"), "%s", s);
    ASSERT(strstr(s, "rlxd_requests_total{endpoint=\"completions\",status=\"200\"} 2\n"));
    ASSERT(strstr(s, "rlxd_requests_total{endpoint=\"chat_completions\",status=\"400\"} 1\n"));
    ASSERT(strstr(s, "rlxd_prompt_tokens_total 12\n"));
    ASSERT(strstr(s, "rlxd_generation_tokens_total 34\n"));
    ASSERT(strstr(s, "rlxd_num_requests_running{model_name=\"tiny\"} 2\n"));
    ASSERT(strstr(s, "rlxd_num_requests_waiting{model_name=\"tiny\"} 1\n"));
    ASSERT(strstr(s, "rlxd_kv_cache_usage_ratio{model_name=\"tiny\"} 0.25\n"));
    ASSERT(strstr(s, "rlxd_prefix_cache_queries_total{model_name=\"tiny\"} 10\n"));
    ASSERT(strstr(s, "rlxd_prefix_cache_hits_total{model_name=\"tiny\"} 4\n"));
    ASSERT(strstr(s, "# TYPE rlxd_preemptions_total counter\n"));
    ASSERT(strstr(s, "rlxd_preemptions_total{model_name=\"tiny\"} 3\n"));
    ASSERT(strstr(s, "# TYPE rlxd_state_slots_used gauge\n"));
    ASSERT(strstr(s, "rlxd_state_slots_used{model_name=\"tiny\"} 5\n"));
    ASSERT(strstr(s, "rlxd_state_slots_total{model_name=\"tiny\"} 16\n"));
    ASSERT(strstr(s, "# TYPE rlxd_state_checkpoints gauge\n"));
    ASSERT(strstr(s, "rlxd_state_checkpoints{model_name=\"tiny\"} 7\n"));
    ASSERT(strstr(s, "rlxd_state_checkpoint_bytes{model_name=\"tiny\"} 7000\n"));
    ASSERT(strstr(s, "# TYPE rlxd_state_checkpoint_hits_total counter\n"));
    ASSERT(strstr(s, "rlxd_state_checkpoint_hits_total{model_name=\"tiny\"} 9\n"));
    ASSERT(strstr(s, "rlxd_state_checkpoint_evictions_total{model_name=\"tiny\"} 2\n"));
    ASSERT(strstr(s, "# TYPE rlxd_time_to_first_token_seconds histogram\n"));
    ASSERT(strstr(s, "rlxd_time_to_first_token_seconds_bucket{le=\"0.001\"} 0\n"));
    ASSERT(strstr(s, "rlxd_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"));
    ASSERT(strstr(s, "rlxd_time_to_first_token_seconds_bucket{le=\"80\"} 1\n"));
    ASSERT(strstr(s, "rlxd_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"));
    ASSERT(strstr(s, "rlxd_time_to_first_token_seconds_count 2\n"));
    ASSERT(strstr(s, "rlxd_time_to_first_token_seconds_sum 100.003000\n"));
    ASSERT(strstr(s, "rlxd_inter_token_latency_seconds_count 0\n"));
    ASSERT(strstr(s, "rlxd_e2e_request_latency_seconds_bucket{le=\"+Inf\"} 0\n"));
    free(s);
}

TEST(access_log_lines)
{
    rlx_access_entry e = {.method = "POST", .path = "/v1/completions", .model = "tiny", .status = 200,
                          .prompt_tokens = 5, .completion_tokens = 7, .ttft_s = 0.0125, .duration_s = 0.5,
                          .finish = "length"};
    char buf[512];
    rlx_access_log_format(&e, false, buf, sizeof buf);
    ASSERT(strstr(buf, "POST /v1/completions 200 model=tiny prompt_tokens=5 completion_tokens=7 ttft=12.5ms "
                       "duration=500.0ms finish=length\n"));
    rlx_access_log_format(&e, true, buf, sizeof buf);
    ASSERT(strstr(buf, "\"method\":\"POST\""));
    ASSERT(strstr(buf, "\"status\":200"));
    ASSERT(strstr(buf, "\"completion_tokens\":7"));
    ASSERT(strstr(buf, "\"ttft_ms\":12.5"));
    ASSERT(buf[strlen(buf) - 1] == '\n');
    e.model = NULL;
    e.ttft_s = -1;
    rlx_access_log_format(&e, false, buf, sizeof buf);
    ASSERT(strstr(buf, "model=- ") && strstr(buf, "ttft=- "));
}

/* Client-chosen text cannot break a log line: escaped in text, valid UTF-8 for JSON, cut whole. */
TEST(log_escape)
{
    char b[128];
    ASSERT_STR_EQ(rlx_log_escape("a\nb\x1b[31m\"q\" \\\r\t\x7f", true, b, sizeof b),
                  "a\\nb\\x1b[31m\\\"q\\\"\\x20\\\\\\r\\t\\x7f");
    ASSERT_STR_EQ(rlx_log_escape("\xc3\xa9 \xc2\x85 \xff \xed\xa0\x80", true, b, sizeof b),
                  "\xc3\xa9\\x20\\xc2\\x85\\x20\\xff\\x20\\xed\\xa0\\x80");
    ASSERT_STR_EQ(rlx_log_escape("a\nb \xff\xc3\xa9", false, b, sizeof b), "a\nb \\xff\xc3\xa9");
    char s[8];
    ASSERT_STR_EQ(rlx_log_escape("abc\x1b\x1b", true, s, sizeof s), "abc...");
    ASSERT_STR_EQ(rlx_log_escape("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", true, s, sizeof s), "\xc3\xa9\xc3\xa9...");
    ASSERT_STR_EQ(rlx_log_escape("abcdefg", true, s, sizeof s), "abcdefg");
    ASSERT_STR_EQ(rlx_log_escape(NULL, true, s, sizeof s), "");
    rlx_access_entry e = {.method = "GET", .path = "/a\nGET /forged", .model = "m\x1b", .status = 404, .ttft_s = -1};
    rlx_access_log_format(&e, false, b, sizeof b);
    ASSERT(strstr(b, "GET /a\\nGET\\x20/forged 404 model=m\\x1b "));
    ASSERT(strchr(b, '\n') == b + strlen(b) - 1);
    char small[40]; /* a line cut short still ends with its newline */
    rlx_access_log_format(&e, false, small, sizeof small);
    ASSERT(small[strlen(small) - 1] == '\n');
}

/* a label value: only \\, " and a line feed escaped (the exposition format knows no other escape),
 * bytes that are not UTF-8 replaced, a value that does not fit cut at a character */
TEST(prometheus_label)
{
    char b[64];
    ASSERT_STR_EQ(rlx_metrics_label("a b\n} 1\nx{y=\"z\\", b, sizeof b), "a b\\n} 1\\nx{y=\\\"z\\\\");
    ASSERT_STR_EQ(rlx_metrics_label("\xc3\xa9\xff\xed\xa0\x80\t", b, sizeof b),
                  "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\t");
    char s[6];
    ASSERT_STR_EQ(rlx_metrics_label("ab\xc3\xa9\xc3\xa9", s, sizeof s), "ab\xc3\xa9");
    ASSERT_STR_EQ(rlx_metrics_label("abcd\"", s, sizeof s), "abcd");
    ASSERT_STR_EQ(rlx_metrics_label(NULL, s, sizeof s), "");
    rlx_metrics m;
    rlx_metrics_init(&m);
    rlx_metrics_model mm = {.name = "x\"} 1\nfake{a=\"b"};
    char *text = rlx_metrics_render(&m, &mm, 1);
    ASSERT(text);
    ASSERT(strstr(text, "rlxd_num_requests_running{model_name=\"x\\\"} 1\\nfake{a=\\\"b\"} 0\n"));
    ASSERT(!strstr(text, "\nfake{"));
    free(text);
}

TEST_MAIN(TEST_ENTRY(prometheus_text), TEST_ENTRY(access_log_lines), TEST_ENTRY(log_escape), TEST_ENTRY(prometheus_label))
