package org.example.auth;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class BasicAuthTest {

    @Test
    public void headerMatchesRfc7617Example() {
        assertEquals("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", BasicAuth.header("Aladdin", "open sesame"));
    }

    @Test
    public void utf8Passwords() {
        assertEquals("Basic dGVzdDoxMjPCow==", BasicAuth.header("test", "123\u00a3"));
    }

    @Test
    public void parsesWhatItBuilds() {
        Credentials c = BasicAuth.parse(BasicAuth.header("bob", "s3:cr3t"));
        assertEquals("bob", c.getUser());
        assertEquals("s3:cr3t", c.getPassword());
    }

    @Test(expected = IllegalArgumentException.class)
    public void rejectsOtherSchemes() {
        BasicAuth.parse("Bearer abc.def");
    }

    @Test(expected = IllegalArgumentException.class)
    public void rejectsCredentialsWithoutColon() {
        BasicAuth.parse("Basic Ym9i");
    }
}
