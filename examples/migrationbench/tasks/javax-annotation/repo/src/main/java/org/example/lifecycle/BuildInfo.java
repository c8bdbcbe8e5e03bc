package org.example.lifecycle;

import javax.annotation.Generated;

/** Written by the build's code generator; do not edit. */
@Generated(value = "org.example.codegen.BuildInfoGenerator", date = "2019-06-01T12:00:00Z")
public final class BuildInfo {

    public static final String NAME = "tiny-lifecycle";
    public static final String VERSION = "1.0.0";

    private BuildInfo() {
    }

    public static String banner() {
        return NAME + " " + VERSION;
    }
}
