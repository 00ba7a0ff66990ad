/* test_server_call.c - the daemon's one protocol for threadpool work answering a client that may
 * leave (server/work.c, rlx_call_start / rlx_call_drop): the client is called back when it is
 * still there, never once it dropped the call (before the work ran, or while it ran), shutdown's
 * cancel answers with UV_ECANCELED without running the work, and done may start the client's
 * next call on the same handle. Run under ASan too: a callback into a freed client is a
 * use-after-free there. The threadpool has one thread here, so that work can be held back. */
#include "tests/rlx_test.h"
#include "server/serve.h"

#include <stdlib.h>

/* A client as a connection is one: it holds its handle on the call in flight. */
typedef struct client {
    rlx_call *call;
    int answers;
    int last_status;
} client;

typedef struct task {
    rlx_call call;                 /* first, as the server's tasks have it */
    uv_sem_t *started, *go;        /* optional: hold run until go is posted */
    int *ran, *done_calls;
    void *seen_client;
    int seen_status;
    bool chain;                    /* done starts another call for the client */
    struct task **out;             /* where done leaves the task (not freed) */
} task;

static void run(rlx_call *call)
{
    task *t = (task *)call;
    if (t->started) uv_sem_post(t->started);
    if (t->go) uv_sem_wait(t->go);
    (*t->ran)++;
}

static void done(rlx_call *call, void *cl, int status)
{
    task *t = (task *)call;
    (*t->done_calls)++;
    t->seen_client = cl;
    t->seen_status = status;
    client *c = cl;
    if (c) {
        c->answers++;
        c->last_status = status;
        if (t->chain) { /* the next call of the same client, on the same handle */
            task *n = calloc(1, sizeof *n);
            n->ran = t->ran;
            n->done_calls = t->done_calls;
            n->out = t->out;
            if (!n || rlx_call_start(t->call.srv, &n->call, false, c, &c->call, run, done)) abort();
            t->out = NULL;
        }
    }
    if (t->out) *t->out = t; /* kept for the test to read; freed there */
    else free(t);
}

typedef struct fixture {
    uv_loop_t loop;
    rlx_srv srv;
    uv_sem_t started, go;          /* a held task posts started, then waits for go */
} fixture;

static void fx_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    uv_loop_init(&f->loop);
    f->srv.loop = &f->loop;
    uv_sem_init(&f->started, 0);
    uv_sem_init(&f->go, 0);
}

static void fx_close(fixture *f)
{
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_loop_close(&f->loop);
    uv_sem_destroy(&f->started);
    uv_sem_destroy(&f->go);
}

/* t's run will wait for f->go once it started */
static void hold(fixture *f, task *t)
{
    t->started = &f->started;
    t->go = &f->go;
}

static task *new_task(int *ran, int *done_calls, task **out)
{
    task *t = calloc(1, sizeof *t);
    if (t) {
        t->ran = ran;
        t->done_calls = done_calls;
        t->out = out;
    }
    return t;
}

TEST(client_there_gets_the_answer)
{
    fixture f;
    fx_init(&f);
    client c = {0};
    int ran = 0, dc = 0;
    task *got = NULL, *t = new_task(&ran, &dc, &got);
    ASSERT(t != NULL);
    ASSERT_EQ(rlx_call_start(&f.srv, &t->call, false, &c, &c.call, run, done), 0);
    ASSERT(c.call == &t->call);
    ASSERT_EQ(f.srv.n_tasks, 1);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(dc, 1);
    ASSERT_EQ(c.answers, 1);
    ASSERT_EQ(c.last_status, 0);
    ASSERT(c.call == NULL); /* cleared before done */
    ASSERT_EQ(f.srv.n_tasks, 0);
    ASSERT(f.srv.works == NULL);
    free(got);
    fx_close(&f);
}

/* The client leaves before the work runs: the work still runs (it owns its inputs) but done
 * gets no client, and the client's handle is not written again. */
TEST(drop_before_run)
{
    fixture f;
    fx_init(&f);
    int ran = 0, dc = 0;
    /* a blocker holds the pool's one thread */
    task *blk = new_task(&ran, &dc, NULL);
    hold(&f, blk);
    client holder = {0};
    ASSERT_EQ(rlx_call_start(&f.srv, &blk->call, false, &holder, &holder.call, run, done), 0);
    uv_sem_wait(&f.started);
    client *c = calloc(1, sizeof *c);
    task *got = NULL, *t = new_task(&ran, &dc, &got);
    ASSERT_EQ(rlx_call_start(&f.srv, &t->call, false, c, &c->call, run, done), 0);
    ASSERT_EQ(ran, 0);
    rlx_call_drop(&c->call);
    ASSERT(c->call == NULL);
    rlx_call_drop(&c->call); /* twice is harmless */
    free(c); /* the client is gone for good: nothing may touch it */
    uv_sem_post(&f.go);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(ran, 2);
    ASSERT_EQ(dc, 2);
    ASSERT(got != NULL);
    ASSERT(got->seen_client == NULL);
    ASSERT_EQ(got->seen_status, 0);
    ASSERT_EQ(holder.answers, 1);
    ASSERT_EQ(f.srv.n_tasks, 0);
    free(got);
    fx_close(&f);
}

/* The client leaves while the work runs. */
TEST(drop_during_run)
{
    fixture f;
    fx_init(&f);
    int ran = 0, dc = 0;
    client *c = calloc(1, sizeof *c);
    task *got = NULL, *t = new_task(&ran, &dc, &got);
    hold(&f, t);
    ASSERT_EQ(rlx_call_start(&f.srv, &t->call, false, c, &c->call, run, done), 0);
    uv_sem_wait(&f.started); /* running now */
    rlx_call_drop(&c->call);
    free(c);
    uv_sem_post(&f.go);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(dc, 1);
    ASSERT(got != NULL && got->seen_client == NULL);
    free(got);
    fx_close(&f);
}

/* Shutdown cancels work not started: done comes with UV_ECANCELED, to the client if still
 * there, and the work never runs; big work waiting for a slot is cancelled alike. */
TEST(cancel_before_run)
{
    fixture f;
    fx_init(&f);
    int ran = 0, dc = 0, blk_ran = 0;
    task *blk = new_task(&blk_ran, &dc, NULL);
    hold(&f, blk);
    ASSERT_EQ(rlx_call_start(&f.srv, &blk->call, true, NULL, NULL, run, done), 0); /* big: holds the big slot */
    uv_sem_wait(&f.started);
    client a = {0}, b = {0};
    task *ga = NULL, *gb = NULL;
    task *ta = new_task(&ran, &dc, &ga), *tb = new_task(&ran, &dc, &gb);
    ASSERT_EQ(rlx_call_start(&f.srv, &ta->call, false, &a, &a.call, run, done), 0);
    ASSERT_EQ(rlx_call_start(&f.srv, &tb->call, true, &b, &b.call, run, done), 0); /* waits in big_head */
    ASSERT(f.srv.big_head == &tb->call.work);
    rlx_srv_cancel_work(&f.srv);
    uv_sem_post(&f.go);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(blk_ran, 1);
    ASSERT_EQ(ran, 0);
    ASSERT_EQ(a.answers, 1);
    ASSERT_EQ(a.last_status, UV_ECANCELED);
    ASSERT_EQ(b.answers, 1);
    ASSERT_EQ(b.last_status, UV_ECANCELED);
    ASSERT(a.call == NULL && b.call == NULL);
    ASSERT_EQ(f.srv.n_tasks, 0);
    free(ga);
    free(gb);
    fx_close(&f);
}

/* done may start the client's next call on the same handle: the handle then holds the new call
 * (the helper clears it before done, not after). */
TEST(done_starts_the_next_call)
{
    fixture f;
    fx_init(&f);
    client c = {0};
    int ran = 0, dc = 0;
    task *got = NULL, *t = new_task(&ran, &dc, &got);
    t->chain = true;
    ASSERT_EQ(rlx_call_start(&f.srv, &t->call, false, &c, &c.call, run, done), 0);
    uv_run(&f.loop, UV_RUN_ONCE);
    while (dc < 1) uv_run(&f.loop, UV_RUN_ONCE);
    ASSERT(c.call != NULL); /* the second call is in flight */
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ASSERT_EQ(ran, 2);
    ASSERT_EQ(c.answers, 2);
    ASSERT(c.call == NULL);
    free(got);
    fx_close(&f);
}

int main(void)
{
    setenv("UV_THREADPOOL_SIZE", "1", 1); /* before libuv starts its pool */
    static const rlx_test_case cases[] = {TEST_ENTRY(client_there_gets_the_answer), TEST_ENTRY(drop_before_run),
                                          TEST_ENTRY(drop_during_run), TEST_ENTRY(cancel_before_run),
                                          TEST_ENTRY(done_starts_the_next_call)};
    return rlx_test_run(cases, sizeof cases / sizeof cases[0]);
}
