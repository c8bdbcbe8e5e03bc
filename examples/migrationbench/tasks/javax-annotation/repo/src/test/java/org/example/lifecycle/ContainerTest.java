package org.example.lifecycle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import javax.annotation.PostConstruct;
import javax.annotation.PreDestroy;
import org.junit.jupiter.api.Test;

class ContainerTest {

    static class Cache {
        private final StringBuilder events;

        Cache(StringBuilder events) {
            this.events = events;
        }

        @PostConstruct
        private void warmUp() {
            events.append("cache+");
        }

        @PreDestroy
        private void flush() {
            events.append("cache-");
        }
    }

    static class Broken {
        @PostConstruct
        void fail() {
            throw new IllegalArgumentException("boom");
        }
    }

    @Test
    void startsInOrderAndStopsInReverse() {
        StringBuilder events = new StringBuilder();
        Container c = new Container();
        ConnectionPool pool = new ConnectionPool(3, events);
        c.start(pool, new Cache(events));
        assertEquals(3, pool.idleCount());
        assertEquals(2, c.size());
        c.stop();
        assertEquals("pool+cache+cache-pool-", events.toString());
        assertEquals(0, pool.idleCount());
    }

    @Test
    void failingPostConstructIsReported() {
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> new Container().start(new Broken()));
        assertEquals("boom", e.getCause().getMessage());
    }

    @Test
    void generatedClassWorks() {
        assertEquals("tiny-lifecycle 1.0.0", BuildInfo.banner());
    }
}
